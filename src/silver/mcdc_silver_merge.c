/*
 * mcdc_silver_merge.c - the copy-on-write merge of a change set into silver
 * (see mcdc_silver.h).
 *
 * The files of silver's version are of two sorts, by their index entries:
 *   clustered  files in key order whose key ranges do not overlap (every
 *              file the merge writes); sorted by first key they cut the
 *              key space into segments, file i owning [first_i, first_i+1)
 *   loose      the others (another writer's: a DELETE or UPDATE of Spark or
 *              delta-rs, an INSERT; files no entry knows are read once to
 *              make one)
 * The change set comes sorted by key, one row per key (the sorter). One
 * pass in key order then visits the segments: a clustered file that a
 * change falls in (between its first and last key), that holds keys of a
 * chunk range, that another writer's rows must join, or that is small and
 * next to rows being written, is read and merged with the changes of its
 * segment; the others are kept, untouched. Loose files a change may hit
 * (by key range and bloom filter) are read whole, their rows sorted and
 * joined to the segments they fall in: after the merge every row is in a
 * clustered file again. Rows come out in key order into files of about
 * file_rows rows, cut wherever a kept file lies between, so the new files
 * are clustered too. One row per key and decision: silver_decide. A key
 * silver holds more than once (another writer appended a row of a key it
 * holds) is held once after the merge: the row whose image bronze wrote
 * last is kept (held_rows), and the others are dropped with a warning; to
 * find such keys, every file of another writer that overlaps others or
 * holds a key twice is read and folded in, the first time it is seen. A
 * history (SCD type 2) has a key's versions together in one file instead
 * (a file ends between keys only), and merges each key's versions with its
 * changes in scd2_key; the rest is shared.
 *
 * Memory: one batch of the file being merged, one chunk of the changes and
 * of other writers' rows, the output window and the writer's row group,
 * whatever the table's size; the sorters spill what passes their budget.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "mcdc_silver.h"
#include "mcdc_delta_dv.h"

typedef struct {
    const char *path;     /* borrowed from the view */
    silver_entry e;       /* owned copy */
    bool clustered, touched, known; /* known: the index had it */
    bool dups;            /* not known, and may hold a key twice (read to make its entry) */
} mfile;

/* One emitted row: kept, updated (change values over the existing row's)
 * or inserted. */
enum { OUT_KEEP = 0, OUT_UPDATE, OUT_INSERT, OUT_ROW /* SCD2: a row built whole (eb, erow) */ };
typedef struct {
    uint8_t kind;
    const mcdc_batch *cb, *eb;
    int32_t crow, erow;
    int32_t n;             /* rows: a run of kept rows (erow on) or of inserted rows
                            * (crow on: the window is written before cb goes), else 1 */
} oref;

/* A stream of existing rows: one clustered file, or the sorted rows of the
 * loose files read. */
typedef struct {
    mcdc_table_reader *r;     /* a file */
    mcdc_batch *b;            /* its current batch */
    mcdc_buf keys;            /* the batch's keys */
    mcdc_buf last;            /* the last key of the batch before */
    const char *path;         /* a file: for messages */
    bool has_hint;            /* a file: its entry's smallest _start_lsn */
    char hint[23];
    size_t *koff;             /* n + 1 offsets */
    int64_t cap_koff;
    int64_t at;
    const silver_chunk *ch;   /* or a sorter's chunk */
    silver_sorter *sorter;
    bool done;
} erows;


typedef struct {
    const silver_merge_in *in;
    silver_merge_out *out;
    silver_writer wq;
    int32_t view_keys[SILVER_KEYS_MAX];   /* key columns in the view */
    int32_t view_lsn;                     /* _start_lsn in the view (-1) */
    int32_t change_key0;                  /* the first key column in the change rows */
    int64_t file_rows;
    /* changes */
    const silver_chunk *c;
    int64_t ci;
    bool c_done;
    /* other writers' rows */
    silver_sorter *loose;
    erows lr;
    /* the output window and the file being written */
    oref *win;
    int64_t nwin;                         /* refs in the window */
    int64_t wrows;                        /* rows they hold */
    const uint8_t *first_key, *last_key;  /* the window's first and last row's (borrowed) */
    uint32_t first_len, last_len;
    bool has_win_lsn;                     /* the smallest _start_lsn of its rows, or below */
    char win_lsn[22];
    int64_t file_n;                       /* rows in the open output file */
    int64_t file_bytes;
    mcdc_buf file_min, file_max;
    bool has_file_lsn;
    char file_lsn[22];
    int32_t idx[SILVER_BATCH_ROWS];
    /* SCD type 2 */
    int32_t view_end;                     /* _end_lsn in the view (-1) */
    int32_t out_lsn;                      /* _start_lsn in out_schema */
    mcdc_batch *scratch;                  /* rows built for the window, until it is flushed */
    mcdc_batch *cur;                      /* the key's open version (one row), or NULL */
    bool full;                            /* the file is full: it ends before the next key */
    mcdc_buf key, wfirst, wlast;          /* the key merged; the window's first and last keys */
    /* a key held more than once (type 1): the row kept, copied when its
     * stream moves past the batch holding it (rows of the window's; emptied
     * when the window is) */
    mcdc_batch *pinned;
    mcdc_buf pin_key;
    bool copy_keys;                       /* the keys emitted point into buffers that change */
    int64_t dup_keys;                     /* keys held more than once */
} merger;

static int nomem(mcdc_error *err) { return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (merge)"); }

/* ---- reading existing rows ------------------------------------------------------------ */

static int erows_keys(merger *m, erows *x, mcdc_error *err) {
    int64_t n = x->b->rows;
    if (n + 1 > x->cap_koff) {
        size_t *v = mcdc_realloc(x->koff, (size_t)(n + 1) * sizeof *v);
        if (v == NULL) return nomem(err);
        x->koff = v;
        x->cap_koff = n + 1;
    }
    mcdc_buf_reset(&x->keys);
    const mcdc_column *kc[SILVER_KEYS_MAX];
    for (int32_t k = 0; k < m->in->n_keys; k++) kc[k] = &x->b->columns[m->view_keys[k]];
    int rc = silver_keys_append(&x->keys, x->koff, kc, m->in->n_keys, 0, n, err);
    /* a clustered file's rows must be in key order: the merge relies on it */
    const uint8_t *k = (const uint8_t *)x->keys.data;
    for (int64_t r = 0; rc == MCDC_OK && r < n; r++) {
        const uint8_t *pk = r ? k + x->koff[r - 1] : (const uint8_t *)x->last.data;
        size_t pl = r ? x->koff[r] - x->koff[r - 1] : x->last.len;
        if ((r > 0 || x->last.len > 0) &&
            silver_key_cmp(pk, pl, k + x->koff[r], x->koff[r + 1] - x->koff[r]) > 0)
            rc = mcdc_error_set(err, MCDC_E_CORRUPT,
                                "silver file %s is not in key order, though its index entry says "
                                "so: remove the directory %s of the table and apply again",
                                x->path, SILVER_INDEX_DIR);
    }
    mcdc_buf_reset(&x->last);
    if (rc == MCDC_OK && n > 0) rc = mcdc_buf_append(&x->last, k + x->koff[n - 1], x->koff[n] - x->koff[n - 1], err);
    return rc;
}

static int flush_window(merger *m, mcdc_error *err);

/* The current existing row's key; false when the stream is done. */
static bool erows_key(const erows *x, const uint8_t **k, uint32_t *len) {
    if (x->done) return false;
    if (x->ch) {
        *k = x->ch->key[x->at];
        *len = x->ch->key_len[x->at];
    } else {
        *k = (const uint8_t *)x->keys.data + x->koff[x->at];
        *len = (uint32_t)(x->koff[x->at + 1] - x->koff[x->at]);
    }
    return true;
}

static const mcdc_batch *erows_batch(const erows *x) { return x->ch ? x->ch->rows : x->b; }

/* Loads the stream's next batch or chunk (the window is flushed first: it
 * may point into the one replaced). */
static int erows_load(merger *m, erows *x, mcdc_error *err) {
    int rc = flush_window(m, err);
    x->at = 0;
    if (x->sorter) {
        while (rc == MCDC_OK) {
            rc = silver_sorter_next(x->sorter, &x->ch, err);
            if (rc || x->ch == NULL || x->ch->n > 0) break;
        }
        if (rc == MCDC_OK && x->ch == NULL) x->done = true;
        return rc;
    }
    int64_t t0 = mcdc_monotonic_us();
    while (rc == MCDC_OK) {
        mcdc_batch_free(x->b);
        x->b = NULL;
        rc = mcdc_table_reader_next(&x->b, x->r, err);
        if (rc || x->b == NULL || x->b->rows > 0) break;
    }
    m->out->read_us += mcdc_monotonic_us() - t0;
    if (rc == MCDC_OK && x->b == NULL) x->done = true;
    if (rc == MCDC_OK && x->b) rc = erows_keys(m, x, err);
    return rc;
}

static int erows_step(merger *m, erows *x, mcdc_error *err) {
    int64_t n = x->ch ? x->ch->n : x->b->rows;
    if (++x->at < n) return MCDC_OK;
    return erows_load(m, x, err);
}

static void erows_close(erows *x) {
    mcdc_table_reader_free(x->r);
    mcdc_batch_free(x->b);
    mcdc_buf_free(&x->keys);
    mcdc_buf_free(&x->last);
    mcdc_free(x->koff);
    memset(x, 0, sizeof *x);
}

/* ---- changes ----------------------------------------------------------------------- */

/* The tracker the merge counts into (NULL: none). */
static mcdc_progress_tracker *progress_of(const silver_merge_in *in) {
    return in->ctx ? in->ctx->progress : NULL;
}

static int changes_load(merger *m, mcdc_error *err) {
    int rc = flush_window(m, err);
    m->ci = 0;
    if (rc == MCDC_OK) rc = silver_sorter_next(m->in->changes, &m->c, err);
    if (rc == MCDC_OK && m->c == NULL) m->c_done = true;
    if (rc == MCDC_OK && m->c) mcdc_progress_add(progress_of(m->in), m->c->n, 0);
    return rc;
}

static bool change_key(const merger *m, const uint8_t **k, uint32_t *len) {
    if (m->c_done) return false;
    *k = m->c->key[m->ci];
    *len = m->c->key_len[m->ci];
    return true;
}

static int change_step(merger *m, mcdc_error *err) {
    if (++m->ci < m->c->n) return MCDC_OK;
    return changes_load(m, err);
}

/* ---- the output ----------------------------------------------------------------------- */

static bool lsn_text_of(const mcdc_batch *b, int32_t col, int64_t row, char out[22]) {
    if (col < 0) return false;
    const mcdc_column *c = &b->columns[col];
    if (!mcdc_col_is_valid(c, row) || c->offsets[row + 1] - c->offsets[row] != 22) return false;
    memcpy(out, c->data + c->offsets[row], 22);
    return true;
}

/* Notes an _start_lsn of a row written: the file's smallest is kept (a
 * lower bound is enough: it only tells chunk ranges which files to read). */
static void note_lsn(merger *m, const char *t) {
    if (!m->has_win_lsn || silver_lsn_text_cmp(t, m->win_lsn) < 0) {
        memcpy(m->win_lsn, t, 22);
        m->has_win_lsn = true;
    }
}

static int note_key(merger *m, const uint8_t *first, uint32_t fl, const uint8_t *last,
                    uint32_t ll, mcdc_error *err) {
    if (m->in->scd2 || m->copy_keys) { /* rows pointing into buffers that change: copies */
        int rc = MCDC_OK;
        if (m->wrows == 0) {
            mcdc_buf_reset(&m->wfirst);
            rc = mcdc_buf_append(&m->wfirst, first, fl, err);
            first = (const uint8_t *)m->wfirst.data;
        }
        mcdc_buf_reset(&m->wlast);
        if (rc == MCDC_OK) rc = mcdc_buf_append(&m->wlast, last, ll, err);
        if (rc) return rc;
        last = (const uint8_t *)m->wlast.data;
    }
    if (m->wrows == 0) m->first_key = first, m->first_len = fl;
    m->last_key = last;
    m->last_len = ll;
    return MCDC_OK;
}

/* SCD2: is k the key of the last row written (to the window or the file)? */
static bool same_as_last(const merger *m, const uint8_t *k, uint32_t kl) {
    if (m->wrows > 0) return silver_key_cmp_fast(k, kl, m->last_key, m->last_len) == 0;
    return m->file_n > 0 && silver_key_cmp_fast(k, kl, (const uint8_t *)m->file_max.data, m->file_max.len) == 0;
}

static int roll(merger *m, mcdc_error *err);

/* Room for rows of key k in the window and the file being written: flushes
 * (and rolls) first when there is none. A history's file ends only between
 * keys: full, it takes more rows of the key it ends with (then the room is
 * the window's). */
static int64_t room(merger *m, const uint8_t *k, uint32_t kl, mcdc_error *err, int *rc) {
    *rc = MCDC_OK;
    if (m->in->scd2) {
        bool full = m->full || m->file_n + m->wrows >= m->file_rows;
        if (full && !same_as_last(m, k, kl)) *rc = roll(m, err);
        else if (m->wrows >= SILVER_BATCH_ROWS) *rc = flush_window(m, err);
    } else if (m->wrows >= SILVER_BATCH_ROWS || m->file_n + m->wrows >= m->file_rows) {
        *rc = flush_window(m, err);
    }
    int64_t r = SILVER_BATCH_ROWS - m->wrows, f = m->file_rows - m->file_n - m->wrows;
    if (m->in->scd2 && (f <= 0 || m->full)) return r;
    return r < f ? r : f;
}

static int emit(merger *m, uint8_t kind, const mcdc_batch *cb, int64_t crow, const mcdc_batch *eb,
                int64_t erow, const uint8_t *key, uint32_t klen, mcdc_error *err) {
    int rc;
    room(m, key, klen, err, &rc);
    if (rc) return rc;
    char t[22];
    if (kind == OUT_KEEP   ? lsn_text_of(eb, m->view_lsn, erow, t)
        : kind == OUT_ROW  ? lsn_text_of(eb, m->out_lsn, erow, t)
                           : lsn_text_of(cb, m->in->change_lsn_col, crow, t))
        note_lsn(m, t);
    if ((rc = note_key(m, key, klen, key, klen, err)) != MCDC_OK) return rc;
    /* an insert of the row after the last one inserted, of the same change
     * rows (a rebuild's, nearly all): the run goes on, written as a range */
    oref *last = m->nwin > 0 ? &m->win[m->nwin - 1] : NULL;
    if (kind == OUT_INSERT && last && last->kind == OUT_INSERT && last->cb == cb && last->crow + last->n == crow)
        last->n++;
    else
        m->win[m->nwin++] = (oref){kind, cb, eb, (int32_t)crow, (int32_t)erow, 1};
    m->wrows++;
    if (kind == OUT_KEEP) m->out->kept++;
    else if (kind == OUT_UPDATE) m->out->updated++;
    else if (kind == OUT_INSERT) m->out->inserted++;
    return MCDC_OK;
}

/* Rows [erow, erow + n) of x's batch kept as they are: one run per window
 * and file; lsn (may be NULL): their smallest _start_lsn or below. */
static int emit_run(merger *m, const erows *x, int64_t erow, int64_t n, const char *lsn,
                    mcdc_error *err) {
    const mcdc_batch *eb = x->b;
    const uint8_t *keys = (const uint8_t *)x->keys.data;
#define KEY_AT(r) keys + x->koff[r], (uint32_t)(x->koff[(r) + 1] - x->koff[r])
    while (n > 0) {
        int rc;
        int64_t k = room(m, KEY_AT(erow), err, &rc);
        if (rc) return rc;
        if (k > n) k = n;
        if (m->in->scd2) { /* a file ends between keys: the run is cut after one */
            int64_t f = m->file_rows - m->file_n - m->wrows, lim = SILVER_BATCH_ROWS - m->wrows;
            if (lim > n) lim = n;
            if (f <= 0 || m->full)
                for (k = 1; k < lim && silver_key_cmp_fast(KEY_AT(erow + k), KEY_AT(erow)) == 0;) k++;
            else
                while (k < lim && silver_key_cmp_fast(KEY_AT(erow + k), KEY_AT(erow + k - 1)) == 0) k++;
        }
        rc = note_key(m, KEY_AT(erow), KEY_AT(erow + k - 1), err);
#undef KEY_AT
        if (rc) return rc;
        if (lsn) note_lsn(m, lsn);
        else
            for (int64_t i = 0; i < k; i++) {
                char t[22];
                if (lsn_text_of(eb, m->view_lsn, erow + i, t)) note_lsn(m, t);
            }
        m->win[m->nwin++] = (oref){OUT_KEEP, NULL, eb, 0, (int32_t)erow, (int32_t)k};
        m->wrows += k;
        m->out->kept += k;
        erow += k;
        n -= k;
    }
    return MCDC_OK;
}

/* Ends the output file being written: its index entry (rows, first and
 * last key, in key order, smallest _start_lsn). */
static int roll(merger *m, mcdc_error *err) {
    int rc = flush_window(m, err);
    if (rc || m->file_n == 0) return rc;
    rc = silver_writer_put(&m->wq, NULL, err);
    if (rc) return rc;
    silver_entry e = {0};
    e.path = mcdc_strdup("?"); /* the writer's path, set once it has ended the file */
    e.rows = m->file_n;
    e.sorted = true;
    e.min_key = mcdc_malloc(m->file_min.len ? m->file_min.len : 1);
    e.max_key = mcdc_malloc(m->file_max.len ? m->file_max.len : 1);
    if (!e.path || !e.min_key || !e.max_key) {
        silver_entry_clear(&e);
        return nomem(err);
    }
    memcpy(e.min_key, m->file_min.data, m->file_min.len);
    memcpy(e.max_key, m->file_max.data, m->file_max.len);
    e.min_len = (uint32_t)m->file_min.len;
    e.max_len = (uint32_t)m->file_max.len;
    e.has_min_lsn = m->has_file_lsn && silver_lsn_parse(e.min_lsn, m->file_lsn, 22);
    rc = silver_index_add(&m->out->index, &e, err);
    silver_entry_clear(&e);
    m->out->files_written++;
    m->file_n = m->file_bytes = 0;
    m->full = false;
    m->has_file_lsn = false;
    mcdc_buf_reset(&m->file_min);
    mcdc_buf_reset(&m->file_max);
    return rc;
}

/* The source of column j of ref o (NULL: the column is NULL there) and its
 * column and row in it. */
static const mcdc_batch *src_of(const merger *m, const oref *o, int32_t j, int32_t *col,
                                int32_t *row) {
    int32_t cc = m->in->change_of_out[j], ec = m->in->exist_of_out[j];
    if (o->kind == OUT_ROW) {
        *col = j;
        *row = o->erow;
        return o->eb;
    }
    if (o->kind != OUT_KEEP && cc >= 0) {
        *col = cc;
        *row = o->crow;
        return o->cb;
    }
    if (o->kind != OUT_INSERT && ec >= 0) {
        *col = ec;
        *row = o->erow;
        return o->eb;
    }
    return NULL;
}

/* Writes the window's rows: each output column taken from the change rows,
 * the existing row, or NULL, in runs of one source. */
static int flush_window(merger *m, mcdc_error *err) {
    if (m->nwin == 0) return MCDC_OK;
    const silver_merge_in *in = m->in;
    mcdc_batch *b = NULL;
    int rc = mcdc_batch_create(&b, in->out_schema, m->wrows, err);
    for (int32_t j = 0; rc == MCDC_OK && j < in->out_schema->n_fields; j++) {
        mcdc_column *dst = &b->columns[j];
        for (int64_t i = 0; rc == MCDC_OK && i < m->nwin;) {
            const oref *o = &m->win[i];
            int32_t col = 0, row = 0;
            const mcdc_batch *src = src_of(m, o, j, &col, &row);
            if (o->n > 1) { /* a run of kept or inserted rows */
                const mcdc_column *sc = src ? &src->columns[col] : NULL;
                if (sc && sc->offsets && sc->offsets[row + o->n] == sc->offsets[row]) {
                    /* no bytes (a history's _end_lsn on open versions):
                     * mcdc_col_take_range would memcpy to or from NULL */
                    for (int32_t r = 0; r < o->n; r++) m->idx[r] = row + r;
                    rc = mcdc_col_take(dst, sc, m->idx, o->n, err);
                } else {
                    rc = sc ? mcdc_col_take_range(dst, sc, row, o->n, err)
                            : mcdc_col_append_nulls(dst, o->n, err);
                }
                i++;
                continue;
            }
            int64_t n = 0;
            while (i + n < m->nwin && m->win[i + n].n == 1 && n < SILVER_BATCH_ROWS) {
                int32_t c2 = 0, r2 = 0;
                if (src_of(m, &m->win[i + n], j, &c2, &r2) != src) break;
                m->idx[n++] = r2;
            }
            if (src) rc = mcdc_col_take(dst, &src->columns[col], m->idx, n, err);
            else rc = mcdc_col_append_nulls(dst, n, err);
            i += n;
        }
    }
    if (rc == MCDC_OK) rc = mcdc_batch_seal(b, err);
    int64_t bytes = rc == MCDC_OK ? mcdc_batch_bytes(b) : 0;
    if (rc == MCDC_OK) rc = silver_writer_put(&m->wq, b, err); /* takes b */
    else mcdc_batch_free(b);
    b = NULL;
    if (rc == MCDC_OK) {
        if (m->file_n == 0) rc = mcdc_buf_append(&m->file_min, m->first_key, m->first_len, err);
        mcdc_buf_reset(&m->file_max);
        if (rc == MCDC_OK) rc = mcdc_buf_append(&m->file_max, m->last_key, m->last_len, err);
        if (m->has_win_lsn && (!m->has_file_lsn || memcmp(m->win_lsn, m->file_lsn, 22) < 0)) {
            memcpy(m->file_lsn, m->win_lsn, 22);
            m->has_file_lsn = true;
        }
        m->file_n += m->wrows;
        m->file_bytes += bytes;
    }
    m->nwin = m->wrows = 0;
    m->has_win_lsn = false;
    if (m->scratch) mcdc_batch_reset(m->scratch);
    if (rc == MCDC_OK && (m->file_n >= m->file_rows || m->file_bytes >= SILVER_FILE_BYTES_MAX)) {
        if (m->in->scd2) m->full = true; /* ended before the next key's row */
        else rc = roll(m, err);
    }
    return rc;
}

/* ---- one key ----------------------------------------------------------------------------- */

/* The winner for existing row (eb, erow): the key's change, or the
 * synthetic delete of the chunk range it lies in when that is later and the
 * chunk does not hold the key (no WAVE row). */
static const silver_rank *winner_for(merger *m, const silver_rank *change, uint32_t tags,
                                     const mcdc_batch *eb, int64_t erow, bool has_lsn,
                                     const uint8_t lsn[10], silver_rank *synth) {
    const silver_merge_in *in = m->in;
    if (in->n_ranges == 0 || (change && (tags & SILVER_TAG_WAVE))) return change;
    int64_t v;
    if (!has_lsn || !silver_range_value(&eb->columns[m->view_keys[0]], erow, &v)) return change;
    const silver_range *r = silver_range_find(in->ranges, in->n_ranges, v);
    if (r == NULL || memcmp(r->stamp, lsn, 10) <= 0) return change;
    silver_rank_delete_at(synth, r->stamp);
    if (change && memcmp(change->b, synth->b, SILVER_RANK_BYTES) >= 0) return change;
    return synth;
}

static int decide_row(merger *m, const silver_rank *change, uint32_t tags, const mcdc_batch *cb,
                      int64_t crow, const mcdc_batch *eb, int64_t erow, const uint8_t *key,
                      uint32_t klen, mcdc_error *err) {
    uint8_t lsn[10];
    char text[22];
    bool has = lsn_text_of(eb, m->view_lsn, erow, text) && silver_lsn_parse(lsn, text, 22);
    silver_rank synth;
    const silver_rank *w = winner_for(m, change, tags, eb, erow, has, lsn, &synth);
    silver_action a = silver_decide(w, has, lsn, m->in->rebuild);
    if (a == SILVER_DELETE) {
        m->out->deleted++;
        return MCDC_OK;
    }
    if (a == SILVER_UPDATE && w != change) a = SILVER_KEEP; /* only a delete is synthetic */
    return a == SILVER_UPDATE ? emit(m, OUT_UPDATE, cb, crow, eb, erow, key, klen, err)
                              : emit(m, OUT_KEEP, NULL, 0, eb, erow, key, klen, err);
}

/* ---- one key of a history (SCD type 2) --------------------------------------------- */

/* An LSN cell ("0x" + 20 hex digits) as 10 bytes. */
static bool col_lsn(const mcdc_column *c, int64_t row, uint8_t out[10]) {
    if (!mcdc_col_is_valid(c, row) || c->offsets[row + 1] - c->offsets[row] != 22) return false;
    return silver_lsn_parse(out, (const char *)c->data + c->offsets[row], 22);
}

/* The row of a wave's stamps (silver_scd2.stamps) at LSN lsn, or -1. */
static int64_t stamp_find(const mcdc_batch *st, const uint8_t lsn[10]) {
    int64_t lo = 0, hi = st ? st->rows : 0;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        uint8_t l[10];
        int c = col_lsn(&st->columns[0], mid, l) ? memcmp(l, lsn, 10) : -1;
        if (c == 0) return mid;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

/* The commit time a stamp (the LSN (lc, lrow)) gives, (c, row): its own;
 * else (a snapshot's rows carry none) the one a wave's chunk stamp maps to,
 * or for another LSN the rebuild's estimate of the snapshot's; else,
 * closing the open version, its image's (never before its start); else
 * NULL. */
static void stamp_time(const merger *m, const mcdc_column *lc, int64_t lrow, const mcdc_column **c,
                       int64_t *row, bool closing) {
    const silver_scd2 *s = m->in->scd2;
    if (mcdc_col_is_valid(*c, *row)) return;
    uint8_t l[10];
    int64_t w = s->stamps && col_lsn(lc, lrow, l) ? stamp_find(s->stamps, l) : -1;
    if (w >= 0 && mcdc_col_is_valid(&s->stamps->columns[1], w)) {
        *c = &s->stamps->columns[1];
        *row = w;
    } else if (w < 0 && s->close && mcdc_col_is_valid(&s->close->columns[1], 0)) {
        *c = &s->close->columns[1];
        *row = 0;
    } else if (closing && m->cur && mcdc_col_is_valid(&m->cur->columns[s->commit_ts], 0)) {
        *c = &m->cur->columns[s->commit_ts];
        *row = 0;
    }
}

/* The open version replaced by a row of out_schema built per column: from
 * the change row (cb, crow) where a column has one (with: a new version,
 * also __START_AT from its _commit_ts, the others NULL; else in place, the
 * others from the open version), or from the existing row (eb, erow). */
static int cur_build(merger *m, const mcdc_batch *cb, int64_t crow, bool fresh,
                     const mcdc_batch *eb, int64_t erow, mcdc_error *err) {
    const silver_merge_in *in = m->in;
    const silver_scd2 *s = in->scd2;
    mcdc_batch *nb = NULL;
    int rc = mcdc_batch_create(&nb, in->out_schema, 1, err);
    for (int32_t j = 0; rc == MCDC_OK && j < in->out_schema->n_fields; j++) {
        mcdc_column *d = &nb->columns[j];
        int32_t cc = in->change_of_out[j], ec = in->exist_of_out[j];
        if (eb) rc = ec >= 0 ? mcdc_col_copy_value(d, &eb->columns[ec], erow, err) : mcdc_col_append_null(d, err);
        else if (cc >= 0) rc = mcdc_col_copy_value(d, &cb->columns[cc], crow, err);
        else if (fresh && j == s->start_at) {
            const mcdc_column *t = &cb->columns[s->change_ts_col];
            int64_t tr = crow;
            stamp_time(m, &cb->columns[in->change_lsn_col], crow, &t, &tr, false);
            rc = mcdc_col_copy_value(d, t, tr, err);
        }
        else if (fresh || j == s->end_at || j == s->end_lsn) rc = mcdc_col_append_null(d, err);
        else rc = mcdc_col_copy_value(d, &m->cur->columns[j], 0, err);
    }
    if (rc == MCDC_OK) rc = mcdc_batch_seal(nb, err);
    if (rc) {
        mcdc_batch_free(nb);
        return rc;
    }
    mcdc_batch_free(m->cur);
    m->cur = nb;
    return MCDC_OK;
}

/* The open version out, closed at the stamp (lsn, ts) of row `row` (lsn
 * NULL: still open), and gone from m->cur. */
static int cur_put(merger *m, const mcdc_column *lsn, const mcdc_column *ts, int64_t row,
                   mcdc_error *err) {
    const silver_merge_in *in = m->in;
    const silver_scd2 *s = in->scd2;
    int rc = m->scratch ? MCDC_OK : mcdc_batch_create(&m->scratch, in->out_schema, SILVER_BATCH_ROWS, err);
    /* room first: a flush empties the scratch rows */
    if (rc == MCDC_OK) room(m, (const uint8_t *)m->key.data, (uint32_t)m->key.len, err, &rc);
    int64_t at = rc == MCDC_OK ? m->scratch->columns[0].length : 0, ts_row = row;
    if (lsn) stamp_time(m, lsn, row, &ts, &ts_row, true);
    for (int32_t j = 0; rc == MCDC_OK && j < in->out_schema->n_fields; j++) {
        mcdc_column *d = &m->scratch->columns[j];
        if (lsn && j == s->end_lsn) rc = mcdc_col_copy_value(d, lsn, row, err);
        else if (lsn && j == s->end_at) rc = mcdc_col_copy_value(d, ts, ts_row, err);
        else rc = mcdc_col_copy_value(d, &m->cur->columns[j], 0, err);
    }
    mcdc_batch_free(m->cur);
    m->cur = NULL;
    if (rc == MCDC_OK)
        rc = emit(m, OUT_ROW, NULL, 0, m->scratch, at, (const uint8_t *)m->key.data, (uint32_t)m->key.len, err);
    return rc;
}

static bool image_eq(const merger *m, const int32_t *cols, int32_t n, const mcdc_batch *cb, int64_t crow) {
    for (int32_t i = 0; i < n; i++)
        if (!silver_value_eq(&m->cur->columns[cols[i]], 0, &cb->columns[m->in->change_of_out[cols[i]]], crow))
            return false;
    return true;
}

static bool lsn_cell(const mcdc_batch *b, int32_t col, int64_t row, uint8_t out[10]) {
    return col >= 0 && col_lsn(&b->columns[col], row, out);
}

/* The last change of one transaction of the key (a transaction's changes
 * of a key make one version), after the newest LSN its versions hold. */
static int scd2_change(merger *m, const silver_rank *rk, const mcdc_batch *cb, int64_t crow,
                       mcdc_error *err) {
    const silver_scd2 *s = m->in->scd2;
    const mcdc_column *lsn = &cb->columns[m->in->change_lsn_col], *ts = &cb->columns[s->change_ts_col];
    int op = silver_rank_op(rk);
    if (silver_op_deletes(op)) {
        if (m->cur == NULL) return MCDC_OK;
        m->out->deleted++;
        return cur_put(m, lsn, ts, crow, err);
    }
    int rc = MCDC_OK;
    if (m->cur) {
        if (op == 0 && image_eq(m, s->image, s->n_image, cb, crow)) return MCDC_OK;
        m->out->updated++;
        if (image_eq(m, s->tracked, s->n_tracked, cb, crow)) return cur_build(m, cb, crow, false, NULL, 0, err);
        rc = cur_put(m, lsn, ts, crow, err);
    }
    m->out->inserted++;
    return rc ? rc : cur_build(m, cb, crow, true, NULL, 0, err);
}

/* Is the change under the cursor of key k (kn bytes) and at LSN lsn? */
static bool change_at(const merger *m, const uint8_t *k, uint32_t kn, const uint8_t *lsn) {
    const uint8_t *kc;
    uint32_t lc;
    return change_key(m, &kc, &lc) && silver_key_cmp_fast(kc, lc, k, kn) == 0 && memcmp(m->c->rank[m->ci].b, lsn, 10) == 0;
}

/* A change row copied out of the chunk it came in (the chunk ends before
 * its transaction may): one row of the change rows' schema. */
static int copy_change(mcdc_batch **out, const mcdc_batch *cb, int64_t row, mcdc_error *err) {
    int rc = mcdc_batch_create(out, cb->schema, 1, err);
    for (int32_t j = 0; rc == MCDC_OK && j < cb->schema->n_fields; j++)
        rc = mcdc_col_copy_value(&(*out)->columns[j], &cb->columns[j], row, err);
    if (rc == MCDC_OK) rc = mcdc_batch_seal(*out, err);
    return rc;
}

/* A key's value as the chunk ranges compare it, from its encoding (a key
 * of a range type encodes as 0x01 + 8 bytes); false for NULL or another
 * layout. */
static bool key_range_value(const uint8_t *k, uint32_t kn, int64_t *v) {
    if (kn != 9 || k[0] != 1) return false;
    uint64_t u = 0;
    for (int i = 1; i < 9; i++) u = u << 8 | k[i];
    *v = (int64_t)(u ^ (1ULL << 63));
    return true;
}

/* Key k of a history: its versions (the clustered file f's, then other
 * writers'), then its changes (with_c), merged. */
static int scd2_key(merger *m, erows *f, const uint8_t *k0, uint32_t kn0, bool with_c, mcdc_error *err) {
    const silver_scd2 *s = m->in->scd2;
    mcdc_buf_reset(&m->key);
    int rc = mcdc_buf_append(&m->key, k0, kn0, err); /* the streams move on */
    const uint8_t *k = (const uint8_t *)m->key.data;
    uint32_t kn = kn0;
    bool has_seen = false;
    uint8_t seen[10], l[10];
    MCDC_ASSERT(m->cur == NULL);
    for (int side = 0; side < 2 && rc == MCDC_OK; side++) {
        erows *x = side == 0 ? f : (m->loose ? &m->lr : NULL);
        const uint8_t *xk;
        uint32_t xl;
        while (rc == MCDC_OK && x && erows_key(x, &xk, &xl) && silver_key_cmp_fast(xk, xl, k, kn) == 0) {
            const mcdc_batch *eb = erows_batch(x);
            bool closed = m->view_end >= 0 && mcdc_col_is_valid(&eb->columns[m->view_end], x->at);
            for (int c = 0; c < 1 + closed; c++)
                if (lsn_cell(eb, c ? m->view_end : m->view_lsn, x->at, l) &&
                    (!has_seen || memcmp(l, seen, 10) > 0))
                    memcpy(seen, l, 10), has_seen = true;
            if (closed) {
                rc = emit(m, OUT_KEEP, NULL, 0, eb, x->at, k, kn, err);
            } else {
                /* two open versions (another writer's doing): the older stays as it is */
                if (m->cur) rc = cur_put(m, NULL, NULL, 0, err);
                if (rc == MCDC_OK) rc = cur_build(m, NULL, 0, false, eb, x->at, err);
            }
            if (rc == MCDC_OK) rc = erows_step(m, x, err);
        }
    }
    /* the key's snapshot point: the stamp of its chunk range when the pass
     * applies that chunk (a wave), else a rebuild's LSN. A key the snapshot
     * lacks was gone there (its row, if any, ranks first at that LSN, after
     * the changes before it) */
    uint8_t snap[10];
    const mcdc_batch *pt = NULL;
    int64_t pt_row = 0, v;
    const silver_range *r = NULL;
    if (m->in->n_ranges > 0 && s->stamps && key_range_value(k, kn, &v))
        r = silver_range_find(m->in->ranges, m->in->n_ranges, v);
    if (r && (pt_row = stamp_find(s->stamps, r->stamp)) >= 0) pt = s->stamps;
    else if (s->close) pt = s->close, pt_row = 0;
    bool snap_done = pt == NULL || !lsn_cell(pt, 0, pt_row, snap);
    const uint8_t *kc;
    uint32_t lc;
    while (rc == MCDC_OK) {
        bool more = with_c && change_key(m, &kc, &lc) && silver_key_cmp_fast(kc, lc, k, kn) == 0;
        const silver_rank *rk = more ? &m->c->rank[m->ci] : NULL;
        int at = rk && !snap_done ? memcmp(rk->b, snap, 10) : 1; /* snap is set only then */
        if (!snap_done && (at > 0 || (at == 0 && silver_rank_op(rk) == 0))) {
            snap_done = true;
            if (at > 0 && m->cur && (!has_seen || memcmp(snap, seen, 10) > 0)) {
                m->out->deleted++;
                rc = cur_put(m, &pt->columns[0], &pt->columns[1], pt_row, err);
            }
        }
        if (rc || !more) break;
        if (has_seen && memcmp(rk->b, seen, 10) <= 0) { /* applied before */
            rc = change_step(m, err);
            continue;
        }
        /* a row is applied once the next is of another key or transaction */
        int64_t ci = m->ci;
        if (ci + 1 < m->c->n) {
            rc = change_step(m, err);
            if (rc == MCDC_OK && !change_at(m, k, kn, m->c->rank[ci].b))
                rc = scd2_change(m, &m->c->rank[ci], m->c->rows, ci, err);
            continue;
        }
        silver_rank last = *rk;
        mcdc_batch *row = NULL;
        rc = copy_change(&row, m->c->rows, ci, err);
        if (rc == MCDC_OK) rc = change_step(m, err); /* the next chunk */
        if (rc == MCDC_OK && !change_at(m, k, kn, last.b)) rc = scd2_change(m, &last, row, 0, err);
        mcdc_batch_free(row);
    }
    if (rc == MCDC_OK && m->cur) rc = cur_put(m, NULL, NULL, 0, err);
    return rc;
}

/* ---- a key held more than once (type 1) ----------------------------------------------- */

/* The existing rows of one key: the one kept so far, and how many. */
typedef struct {
    const mcdc_batch *b;  /* its batch: a stream's, or m->pinned */
    int64_t row;
    const uint8_t *key;
    uint32_t klen;
    int n;
} held_rows;

/* How likely a row's image is the one bronze wrote last: a _start_lsn up
 * to silver's position (newer ones no pass wrote), then the newest of
 * those; none lowest. */
static bool held_better(const merger *m, const mcdc_batch *a, int64_t ra, const mcdc_batch *b,
                        int64_t rb) {
    uint8_t la[10], lb[10];
    char t[22];
    bool ha = lsn_text_of(a, m->view_lsn, ra, t) && silver_lsn_parse(la, t, 22);
    bool hb = lsn_text_of(b, m->view_lsn, rb, t) && silver_lsn_parse(lb, t, 22);
    const silver_merge_in *in = m->in;
    bool pa = ha && (!in->has_position || memcmp(la, in->position, 10) <= 0);
    bool pb = hb && (!in->has_position || memcmp(lb, in->position, 10) <= 0);
    if (pa != pb) return pa;
    if (ha != hb) return ha;
    return ha && memcmp(la, lb, 10) > 0;
}

/* Copies the row kept (h) out of the batch its stream is about to leave. */
static int pin_row(merger *m, held_rows *h, mcdc_error *err) {
    const mcdc_batch *src = h->b;
    int rc = MCDC_OK;
    if (m->pinned == NULL)
        rc = mcdc_batch_create(&m->pinned, (mcdc_schema *)mcdc_table_view_schema(m->in->view), 16, err);
    else if (m->nwin == 0) /* no row of the window points into it */
        mcdc_batch_reset(m->pinned);
    int64_t at = rc == MCDC_OK ? m->pinned->columns[0].length : 0;
    for (int32_t j = 0; rc == MCDC_OK && j < src->schema->n_fields; j++)
        rc = mcdc_col_copy_value(&m->pinned->columns[j], &src->columns[j], h->row, err);
    mcdc_buf_reset(&m->pin_key);
    if (rc == MCDC_OK) rc = mcdc_buf_append(&m->pin_key, h->key, h->klen, err);
    if (rc) return rc;
    h->b = m->pinned;
    h->row = at;
    h->key = (const uint8_t *)m->pin_key.data;
    return MCDC_OK;
}

/* Row x->at, of the key being merged: kept when it is the first or better
 * than the one kept; then x steps on (pinning the row kept first when x
 * leaves the batch holding it). The first row seen wins ties: apply's own
 * (the clustered file's) before another writer's. */
static int held_step(merger *m, held_rows *h, erows *x, const uint8_t *xk, uint32_t xl,
                     mcdc_error *err) {
    const mcdc_batch *eb = erows_batch(x);
    if (h->n++ == 0 || held_better(m, eb, x->at, h->b, h->row)) {
        h->b = eb;
        h->row = x->at;
        h->key = xk;
        h->klen = xl;
    }
    int64_t n = x->ch ? x->ch->n : x->b->rows;
    int rc = h->b == eb && x->at + 1 >= n ? pin_row(m, h, err) : MCDC_OK;
    return rc ? rc : erows_step(m, x, err);
}

/* A key held n > 1 times: a warning naming it (the first few keys; the
 * merge's log line counts them all). */
static void held_warn(merger *m, const held_rows *h) {
    m->out->duplicates += h->n - 1;
    if (m->dup_keys++ >= 10) return;
    const mcdc_column *kc[SILVER_KEYS_MAX];
    for (int32_t k = 0; k < m->in->n_keys; k++) kc[k] = &h->b->columns[m->view_keys[k]];
    mcdc_buf v = {0}, names = {0};
    silver_key_text(&v, kc, m->in->n_keys, h->row);
    for (int32_t k = 0; k < m->in->n_keys; k++)
        mcdc_buf_printf(&names, NULL, "%s%s", k ? ", " : "", m->in->keys[k]);
    char lsn[23] = "none";
    char t[22];
    if (lsn_text_of(h->b, m->view_lsn, h->row, t)) snprintf(lsn, sizeof lsn, "%.22s", t);
    bool many = m->in->n_keys > 1;
    mcdc_log(MCDC_LOG_WARN,
             "silver %s held the key %s%.*s%s = %s%.*s%s more than once (%d rows: another "
             "writer's doing): kept the row whose _start_lsn is %s, the image bronze wrote "
             "last, and dropped %d (the files they were in stay in the table's history)",
             mcdc_table_name(m->in->target), many ? "(" : "", (int)names.len,
             names.data ? (const char *)names.data : "", many ? ")" : "", many ? "(" : "",
             (int)v.len, v.data ? (const char *)v.data : "", many ? ")" : "", h->n, lsn, h->n - 1);
    mcdc_buf_free(&v);
    mcdc_buf_free(&names);
}

/* Rows and changes of keys below hi (NULL: all), merged: the clustered file
 * (f, may be NULL), other writers' rows and the changes. */
static int merge_until(merger *m, erows *f, const uint8_t *hi, uint32_t hi_len, mcdc_error *err) {
    int rc = MCDC_OK;
    for (;;) {
        const uint8_t *kc = NULL, *kf = NULL, *kl = NULL, *k = NULL;
        uint32_t lc = 0, lf = 0, ll = 0, kn = 0;
        bool hc = change_key(m, &kc, &lc), hf = f && erows_key(f, &kf, &lf),
             hl = m->loose && erows_key(&m->lr, &kl, &ll);
        if (hc && hi && silver_key_cmp_fast(kc, lc, hi, hi_len) >= 0) hc = false;
        if (hf && hi && silver_key_cmp_fast(kf, lf, hi, hi_len) >= 0) hf = false;
        if (hl && hi && silver_key_cmp_fast(kl, ll, hi, hi_len) >= 0) hl = false;
        if (!hc && !hf && !hl) return MCDC_OK;
        if (hf && !m->in->rebuild && m->in->n_ranges == 0) {
            /* the file's rows below the next change and the next other
             * writer's row are kept as they are: one run */
            const uint8_t *lim = hc ? kc : NULL;
            uint32_t limn = hc ? lc : 0;
            if (hl && (!lim || silver_key_cmp_fast(kl, ll, lim, limn) < 0)) lim = kl, limn = ll;
            if (!lim || silver_key_cmp_fast(kf, lf, lim, limn) < 0) {
                int64_t lo = f->at, hi_row = f->b->rows;
                const uint8_t *keys = (const uint8_t *)f->keys.data;
                if (lim) { /* the first row at or past lim: gallop, runs are short */
                    int64_t base = f->at, step = 1, prev = base;
                    while (base + step < hi_row &&
                           silver_key_cmp_fast(keys + f->koff[base + step], f->koff[base + step + 1] - f->koff[base + step],
                                lim, limn) < 0) {
                        prev = base + step;
                        step *= 2;
                    }
                    lo = prev + 1;
                    if (base + step < hi_row) hi_row = base + step;
                }
                if (lim)
                    while (lo < hi_row) {
                        int64_t mid = lo + (hi_row - lo) / 2;
                        if (silver_key_cmp_fast(keys + f->koff[mid], f->koff[mid + 1] - f->koff[mid], lim, limn) < 0)
                            lo = mid + 1;
                        else
                            hi_row = mid;
                    }
                else
                    lo = hi_row;
                rc = emit_run(m, f, f->at, lo - f->at, f->has_hint ? f->hint : NULL, err);
                f->at = lo;
                if (rc == MCDC_OK && f->at >= f->b->rows) rc = erows_load(m, f, err);
                if (rc) return rc;
                continue;
            }
        }
        /* the smallest key of the three */
        if (hc) k = kc, kn = lc;
        if (hf && (!k || silver_key_cmp_fast(kf, lf, k, kn) < 0)) k = kf, kn = lf;
        if (hl && (!k || silver_key_cmp_fast(kl, ll, k, kn) < 0)) k = kl, kn = ll;
        bool with_c = hc && silver_key_cmp_fast(kc, lc, k, kn) == 0;
        if (m->in->scd2) {
            if ((rc = scd2_key(m, f, k, kn, with_c, err)) != MCDC_OK) return rc;
            continue;
        }
        const silver_rank *rank = with_c ? &m->c->rank[m->ci] : NULL;
        uint32_t tags = with_c ? m->c->tags[m->ci] : 0;
        const mcdc_batch *cb = with_c ? m->c->rows : NULL;
        int64_t crow = m->ci;
        const uint8_t *ckey = with_c ? kc : NULL;
        /* the existing rows of k: the clustered file's, then other writers';
         * one is kept (more: another writer's doing) */
        held_rows h = {0};
        for (int side = 0; side < 2 && rc == MCDC_OK; side++) {
            erows *x = side == 0 ? f : (m->loose ? &m->lr : NULL);
            const uint8_t *xk;
            uint32_t xl;
            while (rc == MCDC_OK && x && erows_key(x, &xk, &xl) && silver_key_cmp_fast(xk, xl, k, kn) == 0)
                rc = held_step(m, &h, x, xk, xl, err);
        }
        if (rc == MCDC_OK && h.n > 1) held_warn(m, &h);
        if (rc == MCDC_OK && h.n > 0) {
            m->copy_keys = h.b == m->pinned; /* its key is pin_key's, rewritten by the next pin */
            rc = decide_row(m, rank, tags, cb, crow, h.b, h.row, h.key, h.klen, err);
            m->copy_keys = false;
        }
        if (rc == MCDC_OK && with_c && h.n == 0 && silver_inserts(rank))
            rc = emit(m, OUT_INSERT, cb, crow, NULL, 0, ckey, lc, err);
        if (rc == MCDC_OK && with_c) rc = change_step(m, err);
        if (rc) return rc;
    }
}

/* ---- entries of files the index does not know --------------------------------------- */

static int cmp_u64(const void *x, const void *y) {
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

/* Reads the key columns (and _start_lsn) of one file: its rows, first and
 * last key, whether it is in key order, its smallest _start_lsn, and (not
 * in order) a bloom filter of its keys. *dups: it may hold a key twice (in
 * order: two equal neighbours; else two equal hashes). */
static int compute_entry(merger *m, const mcdc_table_file *tf, silver_entry *e, bool *dups,
                         mcdc_error *err) {
    const silver_merge_in *in = m->in;
    memset(e, 0, sizeof *e);
    const mcdc_schema *vs = mcdc_table_view_schema(in->view);
    const char *cols[SILVER_KEYS_MAX + 1];
    int32_t nc = 0;
    for (int32_t k = 0; k < in->n_keys; k++) cols[nc++] = vs->fields[m->view_keys[k]].name;
    if (m->view_lsn >= 0) cols[nc++] = "_start_lsn";
    mcdc_table_reader *r = NULL;
    int rc = mcdc_table_reader_open(&r, in->view, tf->path, cols, nc, NULL, err);
    mcdc_buf key = {0}, prev = {0};
    uint64_t *hashes = NULL;
    int64_t cap = 0;
    bool sorted = true, has_lsn = false;
    *dups = false;
    char lsn[22];
    mcdc_batch *b = NULL;
    while (rc == MCDC_OK && (rc = mcdc_table_reader_next(&b, r, err)) == MCDC_OK && b) {
        const mcdc_column *kc[SILVER_KEYS_MAX];
        for (int32_t k = 0; k < in->n_keys; k++) kc[k] = &b->columns[k];
        if (e->rows + b->rows > cap) {
            int64_t nc2 = cap ? cap : 1024;
            while (nc2 < e->rows + b->rows) nc2 *= 2;
            uint64_t *v = mcdc_realloc(hashes, (size_t)nc2 * sizeof *v);
            if (v == NULL) rc = nomem(err);
            else hashes = v, cap = nc2;
        }
        for (int64_t i = 0; rc == MCDC_OK && i < b->rows; i++) {
            mcdc_buf_reset(&key);
            rc = silver_key_append(&key, kc, in->n_keys, i, err);
            if (rc) break;
            hashes[e->rows] = silver_hash(key.data, key.len);
            int order = e->rows > 0 ? silver_key_cmp((const uint8_t *)prev.data, prev.len,
                                                     (const uint8_t *)key.data, key.len)
                                    : -1;
            sorted = sorted && order <= 0;
            *dups = *dups || order == 0;
            mcdc_buf_reset(&prev);
            rc = mcdc_buf_append(&prev, key.data, key.len, err);
            /* min and max over all rows (a file not in order has them anywhere) */
            if (rc == MCDC_OK && (e->min_key == NULL ||
                silver_key_cmp((const uint8_t *)key.data, key.len, e->min_key, e->min_len) < 0)) {
                uint8_t *v = mcdc_realloc(e->min_key, key.len);
                if (v == NULL) rc = nomem(err);
                else memcpy(v, key.data, key.len), e->min_key = v, e->min_len = (uint32_t)key.len;
            }
            if (rc == MCDC_OK &&
                (e->max_key == NULL ||
                 silver_key_cmp((const uint8_t *)key.data, key.len, e->max_key, e->max_len) > 0)) {
                uint8_t *v = mcdc_realloc(e->max_key, key.len);
                if (v == NULL) rc = nomem(err);
                else memcpy(v, key.data, key.len), e->max_key = v, e->max_len = (uint32_t)key.len;
            }
            char t[22];
            if (rc == MCDC_OK && m->view_lsn >= 0 && lsn_text_of(b, nc - 1, i, t) &&
                (!has_lsn || memcmp(t, lsn, 22) < 0)) {
                memcpy(lsn, t, 22);
                has_lsn = true;
            }
            if (rc == MCDC_OK) e->rows++;
        }
        mcdc_batch_free(b);
        b = NULL;
    }
    e->sorted = sorted && e->rows > 0;
    e->has_min_lsn = has_lsn && silver_lsn_parse(e->min_lsn, lsn, 22);
    if (rc == MCDC_OK && !e->sorted) rc = silver_bloom_build(&e->bloom, hashes, e->rows, err);
    if (rc == MCDC_OK && !sorted && e->rows > 1) { /* the bloom is built: its order is free */
        qsort(hashes, (size_t)e->rows, sizeof *hashes, cmp_u64);
        for (int64_t i = 1; i < e->rows && !*dups; i++) *dups = hashes[i] == hashes[i - 1];
    }
    if (rc == MCDC_OK && (e->path = mcdc_strdup(tf->path)) == NULL) rc = nomem(err);
    mcdc_free(hashes);
    mcdc_buf_free(&key);
    mcdc_buf_free(&prev);
    mcdc_table_reader_free(r);
    m->out->files_read++;
    if (rc) {
        silver_entry_clear(e);
        mcdc_error_wrap(err, "reading the keys of %s in %s", tf->path, mcdc_table_name(in->target));
    }
    return rc;
}

static int entry_copy(silver_entry *dst, const silver_entry *src, mcdc_error *err) {
    *dst = *src;
    dst->path = mcdc_strdup(src->path);
    dst->min_key = src->min_len ? mcdc_malloc(src->min_len) : NULL;
    dst->max_key = src->max_len ? mcdc_malloc(src->max_len) : NULL;
    dst->bloom.words = src->bloom.nbits ? mcdc_malloc(src->bloom.nbits / 8) : NULL;
    if (!dst->path || (src->min_len && !dst->min_key) || (src->max_len && !dst->max_key) ||
        (src->bloom.nbits && !dst->bloom.words)) {
        silver_entry_clear(dst);
        return nomem(err);
    }
    if (src->min_len) memcpy(dst->min_key, src->min_key, src->min_len);
    if (src->max_len) memcpy(dst->max_key, src->max_key, src->max_len);
    if (src->bloom.nbits) memcpy(dst->bloom.words, src->bloom.words, src->bloom.nbits / 8);
    return MCDC_OK;
}

/* ---- planning ---------------------------------------------------------------------------- */

static int by_min(const void *a, const void *b) {
    const mfile *x = *(mfile *const *)a, *y = *(mfile *const *)b;
    int c = silver_key_cmp(x->e.min_key, x->e.min_len, y->e.min_key, y->e.min_len);
    return c ? c : strcmp(x->path, y->path); /* one order, whatever the view's */
}

static int by_entry_min(const void *a, const void *b) {
    const silver_entry *x = *(const silver_entry *const *)a, *y = *(const silver_entry *const *)b;
    return silver_key_cmp(x->min_key, x->min_len, y->min_key, y->min_len);
}

/* Does a chunk range overlap file f's keys while f may hold rows older
 * than its stamp? */
static bool range_touches(const merger *m, const mfile *f) {
    const silver_merge_in *in = m->in;
    if (in->n_ranges == 0 || f->e.rows == 0) return false;
    int64_t lo = 0, hi = 0;
    if (!key_range_value(f->e.min_key, f->e.min_len, &lo) ||
        !key_range_value(f->e.max_key, f->e.max_len, &hi))
        return true; /* NULL keys or another layout: read it */
    for (int32_t i = 0; i < in->n_ranges; i++) {
        const silver_range *r = &in->ranges[i];
        if ((r->has_hi && lo >= r->hi) || (r->has_lo && hi < r->lo)) continue;
        if (!f->e.has_min_lsn || memcmp(f->e.min_lsn, r->stamp, 10) < 0) return true;
    }
    return false;
}

/* Which loose files a change may hit: their key range holds its key and
 * their bloom filter does not rule it out. One pass over the changes' keys.
 * All of them (fold_all) on a copy-on-write silver, where every loose file
 * is another writer's (it may hold a key silver holds: folded, the key is
 * held once), and once one file is another writer's not seen before (on a
 * merged-on-read silver too: its rows may repeat keys whose rows stand in
 * the files merge-on-read wrote). */
static int touch_loose(merger *m, mfile **loose, int64_t n, bool fold_all, mcdc_error *err) {
    int64_t todo = 0;
    for (int64_t i = 0; i < n; i++) {
        if (fold_all || m->in->rebuild || loose[i]->e.rows == 0 || range_touches(m, loose[i]))
            loose[i]->touched = true;
        todo += !loose[i]->touched;
    }
    /* Small ones are folded in when there are several. */
    int64_t small = 0;
    for (int64_t i = 0; i < n; i++) small += !loose[i]->touched && loose[i]->e.rows < m->file_rows / 4;
    if (small >= 4)
        for (int64_t i = 0; i < n; i++)
            if (loose[i]->e.rows < m->file_rows / 4 && !loose[i]->touched) loose[i]->touched = true, todo--;
    if (todo == 0) return MCDC_OK;
    int rc = silver_sorter_rewind(m->in->changes, true, err);
    const silver_chunk *ch;
    int64_t first = 0; /* loose files by first key: those before it end before the keys seen */
    while (rc == MCDC_OK && (rc = silver_sorter_next(m->in->changes, &ch, err)) == MCDC_OK && ch) {
        for (int64_t r = 0; r < ch->n; r++) {
            const uint8_t *k = ch->key[r];
            uint32_t kl = ch->key_len[r];
            uint64_t h = 0;
            bool hashed = false;
            for (int64_t i = first; i < n; i++) {
                mfile *f = loose[i];
                if (silver_key_cmp(f->e.min_key, f->e.min_len, k, kl) > 0) break;
                if (f->touched || silver_key_cmp(k, kl, f->e.max_key, f->e.max_len) > 0) continue;
                if (!hashed) h = silver_hash(k, kl), hashed = true;
                if (silver_bloom_may(&f->e.bloom, h)) f->touched = true;
            }
            while (first < n && (loose[first]->touched ||
                                 silver_key_cmp(loose[first]->e.max_key, loose[first]->e.max_len, k, kl) < 0))
                first++;
        }
    }
    return rc;
}

/* Reads the touched loose files' rows into one sorted stream. */
static int sort_loose(merger *m, mfile **loose, int64_t n, mcdc_error *err) {
    const silver_merge_in *in = m->in;
    if (n == 0) return MCDC_OK;
    silver_sorter_cfg sc = {.schema = (mcdc_schema *)mcdc_table_view_schema(in->view),
                            .key_cols = m->view_keys, .n_keys = in->n_keys, .ranked = false,
                            .lsn_col = -1, .cmd_col = -1, .seq_col = -1, .op_col = -1,
                            .memory_bytes = in->memory_bytes, .spill = in->spill,
                            .spill_prefix = in->spill_prefix};
    int rc = MCDC_OK;
    bool any = false;
    for (int64_t i = 0; i < n && rc == MCDC_OK; i++) {
        if (!loose[i]->touched) continue;
        if (!any && (rc = silver_sorter_create(&m->loose, &sc, err)) != MCDC_OK) break;
        any = true;
        mcdc_table_reader *r = NULL;
        rc = mcdc_table_reader_open(&r, in->view, loose[i]->path, NULL, 0, NULL, err);
        mcdc_batch *b = NULL;
        while (rc == MCDC_OK && (rc = mcdc_table_reader_next(&b, r, err)) == MCDC_OK && b) {
            rc = silver_sorter_add(m->loose, b, NULL, 0, NULL, err);
            mcdc_batch_free(b);
            b = NULL;
        }
        mcdc_table_reader_free(r);
        m->out->files_read++;
    }
    if (rc == MCDC_OK && m->loose) rc = silver_sorter_finish(m->loose, err);
    if (rc == MCDC_OK && m->loose) rc = silver_sorter_rewind(m->loose, false, err);
    if (rc == MCDC_OK && m->loose) {
        m->lr.sorter = m->loose;
        rc = erows_load(m, &m->lr, err);
    }
    return rc;
}

/* Is silver merged on read (its property): then the files merge-on-read
 * wrote overlap others by design. */
static bool merged_on_read(const mcdc_table_view *v) {
    const char *p = v ? mcdc_table_view_config(v, SILVER_PROP_DELETION_VECTORS) : NULL;
    return p && strcasecmp(p, "true") == 0;
}

int silver_merge_foreign(mcdc_table *target, mcdc_table_view *view, const char *const *keys,
                         int32_t n_keys, bool *fold, mcdc_error *err) {
    *fold = false;
    const mcdc_schema *vs = view ? mcdc_table_view_schema(view) : NULL;
    size_t nf = view ? mcdc_table_view_file_count(view) : 0;
    if (nf == 0) return MCDC_OK;
    mcdc_schema *ks = NULL;
    int rc = mcdc_schema_create(&ks, n_keys, err);
    for (int32_t k = 0; rc == MCDC_OK && k < n_keys; k++) {
        int32_t j = mcdc_schema_find(vs, keys[k]);
        if (j < 0) { /* the merge says so, naming it */
            mcdc_schema_unref(ks);
            return MCDC_OK;
        }
        const mcdc_field *f = &vs->fields[j];
        rc = mcdc_schema_set(ks, k, f->name, f->type, f->precision, f->scale, f->byte_width, true, err);
    }
    silver_index ix = {0};
    if (rc == MCDC_OK) rc = silver_index_load(&ix, mcdc_table_storage(target), ks, err);
    mcdc_schema_unref(ks);
    const silver_entry **byk = rc ? NULL : mcdc_calloc(nf, sizeof *byk);
    if (rc == MCDC_OK && byk == NULL) rc = nomem(err);
    bool cow = !merged_on_read(view);
    int64_t n = 0;
    for (size_t i = 0; rc == MCDC_OK && i < nf && !*fold; i++) {
        const silver_entry *e = silver_index_find(&ix, mcdc_table_view_file(view, i).path);
        *fold = e == NULL || (cow && (!e->sorted || e->rows == 0));
        if (e && e->rows > 0) byk[n++] = e;
    }
    /* copy-on-write: files overlapping others (sorted by first key, each
     * must start past the last one's end) */
    if (rc == MCDC_OK && cow && !*fold && n > 1) {
        qsort(byk, (size_t)n, sizeof *byk, by_entry_min);
        for (int64_t i = 1; i < n && !*fold; i++)
            *fold = silver_key_cmp(byk[i]->min_key, byk[i]->min_len, byk[i - 1]->max_key,
                                   byk[i - 1]->max_len) <= 0;
    }
    mcdc_free(byk);
    silver_index_clear(&ix);
    return rc;
}

/* ---- the pass ------------------------------------------------------------------------------ */

static int add_remove(silver_merge_out *out, const char *path, mcdc_error *err) {
    char **v = mcdc_realloc(out->removes, (out->n_removes + 1) * sizeof *v);
    if (v == NULL) return nomem(err);
    out->removes = v;
    if ((v[out->n_removes] = mcdc_strdup(path)) == NULL) return nomem(err);
    out->n_removes++;
    return MCDC_OK;
}

static int open_file(merger *m, erows *x, const mfile *f, mcdc_error *err) {
    memset(x, 0, sizeof *x);
    x->path = f->path;
    if (f->e.has_min_lsn) {
        silver_lsn_format(x->hint, f->e.min_lsn);
        x->has_hint = true;
    }
    int rc = mcdc_table_reader_open(&x->r, m->in->view, f->path, NULL, 0, NULL, err);
    if (rc == MCDC_OK) rc = erows_load(m, x, err);
    m->out->files_read++;
    return rc;
}

/* Is there anything below hi (NULL: at all) among changes and other
 * writers' rows? */
static bool pending_below(merger *m, const uint8_t *hi, uint32_t hl) {
    const uint8_t *k;
    uint32_t l;
    if (change_key(m, &k, &l) && (!hi || silver_key_cmp(k, l, hi, hl) < 0)) return true;
    return m->loose && erows_key(&m->lr, &k, &l) && (!hi || silver_key_cmp(k, l, hi, hl) < 0);
}

static int run_pass(merger *m, mfile **cl, int64_t ncl, mcdc_error *err) {
    int rc = silver_sorter_rewind(m->in->changes, false, err);
    if (rc == MCDC_OK) rc = changes_load(m, err);
    /* keys below the first clustered file */
    if (rc == MCDC_OK) rc = merge_until(m, NULL, ncl ? cl[0]->e.min_key : NULL, ncl ? cl[0]->e.min_len : 0, err);
    for (int64_t s = 0; s < ncl && rc == MCDC_OK; s++) {
        mfile *f = cl[s];
        const uint8_t *hi = s + 1 < ncl ? cl[s + 1]->e.min_key : NULL;
        uint32_t hl = s + 1 < ncl ? cl[s + 1]->e.min_len : 0;
        /* anything between the file's first and last key? */
        bool inside = pending_below(m, NULL, 0);
        if (inside) {
            const uint8_t *k = NULL, *k2 = NULL;
            uint32_t l = 0, l2 = 0;
            bool a = change_key(m, &k, &l), b = m->loose && erows_key(&m->lr, &k2, &l2);
            inside = (a && silver_key_cmp(k, l, f->e.max_key, f->e.max_len) <= 0) ||
                     (b && silver_key_cmp(k2, l2, f->e.max_key, f->e.max_len) <= 0);
        }
        bool small = f->e.rows < m->file_rows / 4;
        bool touch = m->in->rebuild || inside || range_touches(m, f) ||
                     (small && (m->file_n > 0 || m->nwin > 0 || pending_below(m, hi, hl)));
        if (touch) {
            erows x;
            rc = open_file(m, &x, f, err);
            if (rc == MCDC_OK) rc = merge_until(m, &x, hi, hl, err);
            MCDC_ASSERT(rc != MCDC_OK || x.done); /* its rows lie below hi */
            erows_close(&x);
            if (rc == MCDC_OK) rc = add_remove(m->out, f->path, err);
            f->touched = true;
        } else {
            /* kept as it is: what comes after it is another file */
            rc = roll(m, err);
            if (rc == MCDC_OK) rc = merge_until(m, NULL, hi, hl, err);
        }
        mcdc_progress_part_done(progress_of(m->in));
    }
    if (rc == MCDC_OK) rc = roll(m, err);
    return rc;
}

int silver_merge_run(silver_merge_out *out, const silver_merge_in *in, mcdc_error *err) {
    memset(out, 0, sizeof *out);
    MCDC_ASSERT(in->target && in->out_schema && in->changes && in->n_keys > 0 &&
                in->n_keys <= SILVER_KEYS_MAX);
    merger *m = mcdc_calloc(1, sizeof *m);
    if (m == NULL) return nomem(err);
    m->in = in;
    m->out = out;
    m->file_rows = in->file_rows > 0 ? in->file_rows : SILVER_FILE_ROWS_DEFAULT;
    m->win = mcdc_calloc(SILVER_BATCH_ROWS, sizeof *m->win);
    int rc = !m->win ? nomem(err) : MCDC_OK;
    /* the key's columns, for the index */
    mcdc_schema *ks = NULL;
    if (rc == MCDC_OK) rc = mcdc_schema_create(&ks, in->n_keys, err);
    for (int32_t k = 0; rc == MCDC_OK && k < in->n_keys; k++) {
        int32_t j = mcdc_schema_find(in->out_schema, in->keys[k]);
        MCDC_ASSERT(j >= 0);
        const mcdc_field *f = &in->out_schema->fields[j];
        rc = mcdc_schema_set(ks, k, f->name, f->type, f->precision, f->scale, f->byte_width, true, err);
        m->view_keys[k] = -1;
        if (in->view) m->view_keys[k] = mcdc_schema_find(mcdc_table_view_schema(in->view), in->keys[k]);
        if (in->view && m->view_keys[k] < 0)
            rc = mcdc_error_set(err, MCDC_E_SCHEMA, "silver table %s has no key column '%s'",
                                mcdc_table_name(in->target), in->keys[k]);
    }
    m->view_lsn = in->view ? mcdc_schema_find(mcdc_table_view_schema(in->view), "_start_lsn") : -1;
    m->view_end = in->view && in->scd2 ? mcdc_schema_find(mcdc_table_view_schema(in->view), SILVER_COL_END_LSN) : -1;
    m->out_lsn = mcdc_schema_find(in->out_schema, "_start_lsn");
    silver_index old = {0};
    if (rc == MCDC_OK && in->view) rc = silver_index_load(&old, mcdc_table_storage(in->target), ks, err);
    if (rc == MCDC_OK) rc = mcdc_appender_open(&out->appender, in->target, in->out_schema, in->props, err);
    /* the new index: the same key columns */
    if (rc == MCDC_OK) {
        out->index.n_keys = in->n_keys;
        out->index.key_names = mcdc_calloc((size_t)in->n_keys, sizeof(char *));
        out->index.key_types = mcdc_calloc((size_t)in->n_keys, sizeof(mcdc_type_id));
        if (!out->index.key_names || !out->index.key_types) rc = nomem(err);
        for (int32_t k = 0; rc == MCDC_OK && k < in->n_keys; k++) {
            out->index.key_names[k] = mcdc_strdup(ks->fields[k].name);
            out->index.key_types[k] = ks->fields[k].type;
            if (!out->index.key_names[k]) rc = nomem(err);
        }
        out->index.built_at = in->view ? mcdc_table_view_version(in->view) + 1 : 0;
    }
    /* every live file with its entry */
    size_t nf = in->view ? mcdc_table_view_file_count(in->view) : 0;
    mfile *files = rc ? NULL : mcdc_calloc(nf ? nf : 1, sizeof *files);
    mfile **cl = rc ? NULL : mcdc_calloc(nf ? nf : 1, sizeof *cl);
    mfile **loose = rc ? NULL : mcdc_calloc(nf ? nf : 1, sizeof *loose);
    if (rc == MCDC_OK && (!files || !cl || !loose)) rc = nomem(err);
    int64_t ncl = 0, nloose = 0;
    for (size_t i = 0; rc == MCDC_OK && i < nf; i++) {
        mcdc_table_file tf = mcdc_table_view_file(in->view, i);
        files[i].path = tf.path;
        const silver_entry *known = silver_index_find(&old, tf.path);
        files[i].known = known != NULL;
        rc = known ? entry_copy(&files[i].e, known, err)
                   : compute_entry(m, &tf, &files[i].e, &files[i].dups, err);
    }
    silver_index_clear(&old);
    /* clustered: in key order and apart from each other (a file that may
     * hold a key twice is read as a loose one: its keys one at a time) */
    for (size_t i = 0; rc == MCDC_OK && i < nf; i++)
        if (files[i].e.sorted && files[i].e.rows > 0 && !files[i].dups) cl[ncl++] = &files[i];
    if (rc == MCDC_OK && ncl > 1) qsort(cl, (size_t)ncl, sizeof *cl, by_min);
    int64_t w = 0;
    for (int64_t i = 0; rc == MCDC_OK && i < ncl; i++) {
        if (w > 0 && silver_key_cmp(cl[i]->e.min_key, cl[i]->e.min_len, cl[w - 1]->e.max_key,
                                    cl[w - 1]->e.max_len) <= 0)
            continue; /* overlaps the one before: loose */
        cl[w++] = cl[i];
        cl[w - 1]->clustered = true;
    }
    ncl = w;
    for (size_t i = 0; rc == MCDC_OK && i < nf; i++)
        if (!files[i].clustered) loose[nloose++] = &files[i];
    if (rc == MCDC_OK && nloose > 1) qsort(loose, (size_t)nloose, sizeof *loose, by_min); /* rows == 0 have no keys */
    bool fold_all = !merged_on_read(in->view);
    for (int64_t i = 0; i < nloose && !fold_all; i++) fold_all = !loose[i]->known;
    if (rc == MCDC_OK && nloose) rc = touch_loose(m, loose, nloose, fold_all, err);
    if (rc == MCDC_OK) rc = sort_loose(m, loose, nloose, err);
    for (int64_t i = 0; rc == MCDC_OK && i < nloose; i++)
        if (loose[i]->touched) rc = add_remove(out, loose[i]->path, err);
    if (rc == MCDC_OK) mcdc_progress_parts_add(progress_of(in), nloose); /* read, or left as they are */
    if (rc == MCDC_OK) rc = silver_writer_start(&m->wq, out->appender, err);
    if (rc == MCDC_OK) rc = run_pass(m, cl, ncl, err);
    int wrc = silver_writer_finish(&m->wq, rc ? NULL : err);
    if (rc == MCDC_OK) rc = wrc;
    out->write_us = m->wq.busy_us;
    /* the files ended, in order: the entries run_pass made */
    if (rc == MCDC_OK && m->wq.n_paths != out->index.n)
        rc = mcdc_error_set(err, MCDC_E_CORRUPT, "the merge ended %lld files but wrote %lld "
                            "entries for them", (long long)m->wq.n_paths, (long long)out->index.n);
    for (int64_t i = 0; rc == MCDC_OK && i < out->index.n; i++) {
        mcdc_free(out->index.entries[i].path);
        out->index.entries[i].path = m->wq.paths[i];
        m->wq.paths[i] = NULL;
    }
    silver_writer_free(&m->wq);
    /* the index after the commit: kept files' entries, and the new ones */
    for (size_t i = 0; rc == MCDC_OK && i < nf; i++)
        if (!files[i].touched) rc = silver_index_add(&out->index, &files[i].e, err);
    if (rc == MCDC_OK) silver_index_sort(&out->index);
    /* entries made of other writers' files go into the index even when
     * nothing else changed: they are not read again */
    bool learned = false;
    for (size_t i = 0; i < nf && files; i++) learned = learned || !files[i].known;
    out->changed = rc == MCDC_OK && (out->n_removes > 0 || out->files_written > 0 || learned);
    if (rc == MCDC_OK && out->changed && in->ctx && mcdc_ctx_crash(in->ctx, "during_merge", in->unit))
        rc = mcdc_error_set(err, MCDC_E_CANCELLED, "killed at crash point during_merge of unit %lld "
                            "(test hook)", (long long)in->unit);
    for (size_t i = 0; files && i < nf; i++) silver_entry_clear(&files[i].e);
    mcdc_free(files);
    mcdc_free(cl);
    mcdc_free(loose);
    erows_close(&m->lr);
    silver_sorter_free(m->loose);
    mcdc_buf_free(&m->file_min);
    mcdc_buf_free(&m->file_max);
    mcdc_batch_free(m->scratch);
    mcdc_batch_free(m->cur);
    mcdc_buf_free(&m->key);
    mcdc_buf_free(&m->wfirst);
    mcdc_buf_free(&m->wlast);
    mcdc_batch_free(m->pinned);
    mcdc_buf_free(&m->pin_key);
    if (rc == MCDC_OK && m->dup_keys > 10)
        mcdc_log(MCDC_LOG_WARN, "silver %s held %lld keys more than once (the first 10 named above)",
                 mcdc_table_name(in->target), (long long)m->dup_keys);
    mcdc_free(m->win);
    mcdc_free(m);
    mcdc_schema_unref(ks);
    if (rc) {
        silver_merge_out_free(out);
        mcdc_error_wrap(err, "merging into %s", mcdc_table_name(in->target));
    }
    return rc;
}

void silver_merge_out_free(silver_merge_out *out) {
    if (out == NULL) return;
    mcdc_free(out->readd_dvs);
    mcdc_dv_writer_free(out->dvw);
    mcdc_appender_free(out->appender);
    for (size_t i = 0; i < out->n_removes; i++) mcdc_free(out->removes[i]);
    mcdc_free(out->removes);
    silver_index_clear(&out->index);
    memset(out, 0, sizeof *out);
}
