/*
 * mcdc_silver_sort.c - rows sorted by key within a memory budget (see
 * mcdc_silver.h).
 *
 * Rows are copied into large accumulation batches; each gets a sort key:
 * its key's bytes, and on a ranked sorter its rank with every byte
 * inverted, so that one memcmp order puts a key's rows together, latest
 * first. When the rows held pass the budget they are sorted, cut to the
 * first row of each key (ranked: the rest only add their tags) and written
 * as a run: a file of raw frames (mcdc_batch_frame.h) in the spill storage,
 * the rows with the sort key, the key length and the tags as three more
 * columns. Reading merges the runs and
 * what is still held, through a heap on the sort keys; a key's first row
 * over all of them is its latest. A history sorter (SCD type 2) keeps the
 * rank as it is and cuts nothing: a key's rows come oldest first.
 *
 * A sorter whose rows can be read again (silver_sorter_set_replay) holds
 * none: it checks that each row added comes after the last, of another key,
 * and reading takes the rows from the replay as one run, checked again (the
 * same order, count and keys); a replayed batch whose keys are all kept is
 * a chunk as it is.
 *
 * With unique_keys, the neighbouring rows of a key that the cut (and the
 * merge of runs) compares anyway are also checked for what proves the key
 * is not unique (mcdc_silver.h): a key's rows are next to each other there,
 * so no other pass over them is needed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_batch_frame.h"
#include "mcdc_lsn.h"
#include "mcdc_silver.h"

/* Accumulation batches hold this many rows (they are few and large, so
 * that sorted output comes in long runs from one batch). */
#define ACC_ROWS (256 * 1024)
/* A batch handed over with fewer rows is copied into an accumulation
 * batch instead of held as it is. */
#define OWNED_ROWS_MIN 4096
/* Rows of a run's frames, and so of its reader's batches: 64 runs merged
 * hold one batch each. */
#define RUN_READ_ROWS 8192

/* Where a run cursor is in its file. A run is a file of frame pairs of up
 * to RUN_READ_ROWS rows: first the sort keys (__skey, __klen, __tags), then
 * the rows. Keys first and apart, because a keys-only pass (the merge's
 * plan) reads each pair's small first frame and only the head of the
 * second, which tells how far to skip; a full pass reads both. */
typedef struct run_reader {
    const char *key; /* the run's file (the sorter's) */
    int64_t size;    /* its bytes */
    int64_t at;      /* where its next pair starts */
    int64_t frame;   /* pairs read: messages name the frame */
} run_reader;

typedef struct {
    /* the sort key's first 16 bytes as two big-endian words (zero-padded):
     * nearly every comparison of a one-integer key and its rank ends here */
    uint64_t pre, pre2;
    uint32_t batch, row;
    uint64_t off;  /* sort key in the arena */
    uint32_t len;  /* sort key bytes */
    uint32_t klen; /* the key's part of it */
    uint32_t tags; /* after the cut: the key's tags OR'ed over its rows */
    uint32_t pad;
} ent;

/* The order of the rows as they come (a replayed sorter's, when added and
 * when replayed): each sort key after the last, of another key. */
typedef struct {
    bool have;
    uint32_t klen;
    uint8_t *last;   /* the last key: SILVER_KEY_BYTES_MAX */
    uint64_t hash;   /* of the keys so far, in order */
    int64_t rows;
} order_check;

/* Where a row of the chunk being built comes from. */
typedef struct {
    const mcdc_batch *src;
    int32_t row;
    int32_t acc; /* src is held batch acc[this]; -1: a run's batch */
} pref;

/* A source of sorted rows while reading: a spilled run, or what is held. */
typedef struct {
    bool is_run;         /* a run, or the replay (r NULL) */
    /* a run */
    run_reader *r;
    mcdc_batch *b;       /* current batch (payload + 3 columns; keys_only: the 3) */
    mcdc_batch *kb;      /* the replay's: the 3 columns apart (b the payload); else NULL */
    int64_t at;
    /* held rows */
    int64_t pos;
    /* its current sort key (cur_fill): compared on every step of the merge */
    bool live;
    const uint8_t *k;
    uint32_t len, klen, tags;
} cursor;

struct silver_sorter {
    silver_sorter_cfg cfg;
    mcdc_schema *schema;     /* the rows held: cfg.schema's first n_cols columns */
    int32_t *held_of;        /* 0..n_cols-1: the held columns in the rows added */
    mcdc_schema *run_schema; /* schema + __skey, __klen, __tags */
    mcdc_schema *key_schema; /* __skey, __klen, __tags: a keys-only pass's batches */
    mcdc_buf io;             /* a frame pair being read (one at a time, for every run) */
    int32_t n_cols;
    /* held */
    mcdc_batch **acc;
    int32_t n_acc, cap_acc;
    ent *ents;
    int64_t n_ents, cap_ents;
    mcdc_buf arena;
    /* spilled */
    char **runs;
    int32_t n_runs, cap_runs;
    int32_t run_seq;       /* runs written (their names' numbers) */
    /* each run's level: 0 spilled, L + 1 merged from runs of level L (or,
     * merged whole at runs_max, above every level merged); the levels never
     * rise along runs[] */
    int32_t level[SILVER_RUNS_MAX];
    int64_t spilled, merges; /* runs spilled from what was held; merges of runs into one */
    char id[37];
    int64_t rows_added;
    int64_t held_max;      /* the most held_bytes seen */
    bool last_owned;       /* the last held batch is a caller's: copy into a new one */
    bool memo_ok;          /* the rank of the last row without seqval and command id */
    silver_rank memo;
    char memo_text[22];
    uint8_t min_lsn[10];   /* ranked: the smallest LSN of the rows added (0xFF..: none) */
    bool finished;
    /* replay (silver_sorter_set_replay) */
    silver_replay_fn replay;
    void *replay_ctx;
    order_check added;     /* the rows added: checked, then let go */
    bool broke;            /* a row came out of order */
    bool replaying;        /* finished: reading replays every row */
    order_check replayed;  /* what the replay gave so far */
    bool replay_restart;   /* the replay's next batch is its first */
    mcdc_buf rkeys;        /* a replayed batch's keys (batch_keys) */
    size_t *rkoff;         /* where each starts in rkeys, and the end */
    int64_t rkoff_cap;
    /* reading */
    bool keys_only;
    bool merging;          /* merge_runs reads: nothing left out */
    bool defer_rows;       /* chunks without rows: silver_sorter_take gathers them */
    bool tie_pending;      /* a history's last row out tied with the one before (unique_keys) */
    cursor *cur;
    int32_t n_cur;
    int32_t *heap;
    int32_t n_heap;
    silver_chunk chunk;
    int32_t *idx;          /* take indexes of the chunk being built */
    pref *pend;            /* the chunk's rows: where each comes from */
    size_t *koff;          /* the chunk's keys: offsets into its bytes */
    mcdc_batch **retired;  /* runs' batches the chunk may take rows from */
    int32_t n_retired, cap_retired;
};

static int nomem(mcdc_error *err) { return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (sorter)"); }

/* What holding the rows takes: the buffers as allocated, and the entries
 * twice (sorting them takes a second array of as many). */
static int64_t held_bytes(const silver_sorter *s) {
    int64_t n = (int64_t)s->arena.cap + (s->cap_ents + s->n_ents) * (int64_t)sizeof(ent);
    for (int32_t i = 0; i < s->n_acc; i++) n += mcdc_batch_cap_bytes(s->acc[i]);
    return n;
}

/* Is what is held at the budget (then it is spilled)? Notes the most held. */
static bool over_budget(silver_sorter *s) {
    int64_t n = held_bytes(s);
    if (n > s->held_max) s->held_max = n;
    return n >= s->cfg.memory_bytes;
}

/* What holding n more rows adds to held_bytes at most: their entries (the
 * array grown by a quarter, and the sort's second array), their sort keys
 * (the arena grown by a quarter, 1 MB at least, keeping room for a whole
 * key; a key takes what the keys held so far took on average, 64 bytes
 * before any), and rows_bytes for the rows. Asked before rows are added,
 * so that what is held spills before it would pass the budget. */
static int64_t add_cost(const silver_sorter *s, int64_t n, int64_t rows_bytes) {
    int64_t cap = s->cap_ents ? s->cap_ents : 4096;
    while (cap < s->n_ents + n) cap += cap / 4;
    int64_t ents = (cap - s->cap_ents + n) * (int64_t)sizeof(ent);
    int64_t per_key = s->n_ents > 0 ? (int64_t)s->arena.len / s->n_ents + 1 : 64;
    int64_t need = (int64_t)s->arena.len + n * per_key + SILVER_KEY_BYTES_MAX + SILVER_RANK_BYTES + 1;
    int64_t acap = (int64_t)s->arena.cap;
    while (acap < need) acap += acap / 4 > (1 << 20) ? acap / 4 : (1 << 20);
    return ents + acap - (int64_t)s->arena.cap + rows_bytes;
}



int silver_sorter_create(silver_sorter **out, const silver_sorter_cfg *cfg, mcdc_error *err) {
    *out = NULL;
    MCDC_ASSERT(cfg->schema && cfg->n_keys > 0 && cfg->spill && cfg->spill_prefix);
    silver_sorter *s = mcdc_calloc(1, sizeof *s);
    if (s == NULL) return nomem(err);
    s->cfg = *cfg;
    memset(s->min_lsn, 0xFF, sizeof s->min_lsn);
    if (s->cfg.memory_bytes <= 0) s->cfg.memory_bytes = SILVER_SORT_BYTES_DEFAULT;
    if (s->cfg.memory_bytes < SILVER_SORT_BYTES_MIN) s->cfg.memory_bytes = SILVER_SORT_BYTES_MIN;
    if (s->cfg.runs_max <= 0 || s->cfg.runs_max > SILVER_RUNS_MAX) s->cfg.runs_max = SILVER_RUNS_MAX;
    if (s->cfg.runs_max < 2) s->cfg.runs_max = 2; /* a merge needs two */
    int32_t in_cols = cfg->schema->n_fields; /* the rows added */
    s->n_cols = cfg->held_cols > 0 ? cfg->held_cols : in_cols;
    MCDC_ASSERT(s->n_cols <= in_cols);
    MCDC_ASSERT(s->n_cols == in_cols || (cfg->ranked && cfg->lsn_col < s->n_cols && cfg->op_col < s->n_cols));
    for (int32_t k = 0; k < cfg->n_keys; k++) MCDC_ASSERT(cfg->key_cols[k] < s->n_cols);
    s->cfg.schema = mcdc_schema_ref(cfg->schema);
    s->arena.limit = SIZE_MAX / 4; /* the budget bounds it, not a batch's limit */
    mcdc_uuid4(s->id);
    int32_t *keys = mcdc_calloc((size_t)cfg->n_keys, sizeof *keys);
    char *prefix = mcdc_strdup(cfg->spill_prefix);
    if (keys == NULL || prefix == NULL) {
        mcdc_free(keys);
        mcdc_free(prefix);
        s->cfg.key_cols = NULL; /* still the caller's: not ours to free */
        s->cfg.spill_prefix = NULL;
        silver_sorter_free(s);
        return nomem(err);
    }
    memcpy(keys, cfg->key_cols, (size_t)cfg->n_keys * sizeof *keys);
    s->cfg.key_cols = keys;
    s->cfg.spill_prefix = prefix;
    int rc = MCDC_OK;
    if (s->n_cols == in_cols) {
        s->schema = mcdc_schema_ref(cfg->schema);
    } else {
        rc = mcdc_schema_create(&s->schema, s->n_cols, err);
        for (int32_t i = 0; rc == MCDC_OK && i < s->n_cols; i++) {
            const mcdc_field *f = &cfg->schema->fields[i];
            rc = mcdc_schema_set(s->schema, i, f->name, f->type, f->precision, f->scale,
                                 f->byte_width, f->nullable, err);
        }
    }
    if (rc == MCDC_OK && (s->held_of = mcdc_calloc((size_t)s->n_cols, sizeof *s->held_of)) == NULL)
        rc = nomem(err);
    for (int32_t i = 0; rc == MCDC_OK && i < s->n_cols; i++) s->held_of[i] = i;
    if (rc == MCDC_OK) rc = mcdc_schema_create(&s->run_schema, s->n_cols + 3, err);
    for (int32_t i = 0; rc == MCDC_OK && i < s->n_cols; i++) {
        const mcdc_field *f = &s->schema->fields[i];
        rc = mcdc_schema_set(s->run_schema, i, f->name, f->type, f->precision, f->scale,
                             f->byte_width, true, err);
    }
    if (rc == MCDC_OK) rc = mcdc_schema_create(&s->key_schema, 3, err);
    static const char *const KEYS[3] = {"__skey", "__klen", "__tags"};
    static const mcdc_type_id KEY_TYPES[3] = {MCDC_TYPE_BINARY, MCDC_TYPE_INT32, MCDC_TYPE_INT32};
    for (int32_t i = 0; rc == MCDC_OK && i < 3; i++) {
        rc = mcdc_schema_set(s->run_schema, s->n_cols + i, KEYS[i], KEY_TYPES[i], 0, 0, 0, false, err);
        if (rc == MCDC_OK) rc = mcdc_schema_set(s->key_schema, i, KEYS[i], KEY_TYPES[i], 0, 0, 0, false, err);
    }
    s->idx = mcdc_calloc(SILVER_BATCH_ROWS, sizeof *s->idx);
    if (rc == MCDC_OK && s->idx == NULL) rc = nomem(err);
    if (rc) {
        silver_sorter_free(s);
        return rc;
    }
    *out = s;
    return MCDC_OK;
}

int64_t silver_sorter_rows(const silver_sorter *s) { return s->rows_added; }

void silver_sorter_set_replay(silver_sorter *s, silver_replay_fn fn, void *ctx) {
    MCDC_ASSERT(s->rows_added == 0 && !s->finished);
    size_t most = SILVER_KEY_BYTES_MAX;
    if (s->added.last == NULL) s->added.last = mcdc_malloc(most);
    if (s->replayed.last == NULL) s->replayed.last = mcdc_malloc(most);
    /* an optimisation: without the memory it is not made */
    bool ok = fn && s->added.last && s->replayed.last;
    s->replay = ok ? fn : NULL;
    s->replay_ctx = ok ? ctx : NULL;
}

bool silver_sorter_replay_broken(const silver_sorter *s) { return s->broke; }

bool silver_sorter_replays(const silver_sorter *s) { return s->replaying; }
int64_t silver_sorter_runs(const silver_sorter *s) { return s->spilled; }
int64_t silver_sorter_merges(const silver_sorter *s) { return s->merges; }
int64_t silver_sorter_held_max(const silver_sorter *s) { return s->held_max; }
void silver_sorter_min_lsn(const silver_sorter *s, uint8_t out[10]) {
    MCDC_ASSERT(s->cfg.ranked);
    memcpy(out, s->min_lsn, sizeof s->min_lsn);
}

/* ---- adding --------------------------------------------------------------------- */

static int32_t cell_i32(const mcdc_column *c, int64_t row) {
    int32_t v;
    memcpy(&v, c->values + row * 4, 4);
    return v;
}

/* The rank of row r of batch b (a ranked sorter's columns). The last row's
 * LSN is remembered: a commit's rows (a snapshot's, all of them) share it. */
static int rank_of(silver_sorter *s, const mcdc_batch *b, int64_t r, silver_rank *out,
                   mcdc_error *err) {
    const silver_sorter_cfg *c = &s->cfg;
    const mcdc_column *lsn = &b->columns[c->lsn_col], *op = &b->columns[c->op_col];
    const mcdc_column *cmd = c->cmd_col >= 0 ? &b->columns[c->cmd_col] : NULL;
    const mcdc_column *seq = &b->columns[c->seq_col];
    if (!mcdc_col_is_valid(lsn, r) || !mcdc_col_is_valid(op, r))
        return mcdc_error_set(err, MCDC_E_CORRUPT,
                              "a bronze row with a NULL _start_lsn or _operation: is this a "
                              "bronze table of mssql-cdc?");
    bool has_cmd = cmd && mcdc_col_is_valid(cmd, r);
    bool has_seq = mcdc_col_is_valid(seq, r);
    const char *lt = (const char *)lsn->data + lsn->offsets[r];
    size_t ll = (size_t)(lsn->offsets[r + 1] - lsn->offsets[r]);
    int32_t o = cell_i32(op, r);
    if (!has_seq && !has_cmd && s->memo_ok && ll == 22 && silver_lsn_text_eq(lt, s->memo_text) &&
        o >= 0 && o <= 4) {
        *out = s->memo; /* the same commit's snapshot row */
        out->b[SILVER_RANK_BYTES - 1] = (uint8_t)o;
        return MCDC_OK;
    }
    const char *sq = has_seq ? (const char *)seq->data + seq->offsets[r] : NULL;
    size_t sl = has_seq ? (size_t)(seq->offsets[r + 1] - seq->offsets[r]) : 0;
    int rc = silver_rank_make(out, lt, ll, has_cmd, has_cmd ? cell_i32(cmd, r) : 0, sq, sl, o, err);
    s->memo_ok = rc == MCDC_OK && !has_seq && !has_cmd && ll == 22;
    if (s->memo_ok) {
        s->memo = *out;
        memcpy(s->memo_text, lt, 22);
    }
    return rc;
}

static int spill_run(silver_sorter *s, mcdc_error *err);

static int grow_ents(silver_sorter *s, int64_t more, mcdc_error *err) {
    if (s->n_ents + more <= s->cap_ents) return MCDC_OK;
    /* by a quarter: counted as allocated, like the arena */
    int64_t cap = s->cap_ents ? s->cap_ents : 4096;
    while (cap < s->n_ents + more) cap += cap / 4;
    ent *v = mcdc_realloc(s->ents, (size_t)cap * sizeof *v);
    if (v == NULL) return nomem(err);
    s->ents = v;
    s->cap_ents = cap;
    return MCDC_OK;
}

/* Room in the arena for `extra` more bytes, grown by a quarter (1 MB at
 * least): it is counted as allocated, and doubling would waste up to half. */
static int arena_room(silver_sorter *s, size_t extra, mcdc_error *err) {
    mcdc_buf *a = &s->arena;
    if (a->len + extra + 1 <= a->cap) return MCDC_OK;
    size_t grow = a->cap / 4;
    if (grow < extra + 1) grow = extra + 1;
    if (grow < ((size_t)1 << 20)) grow = (size_t)1 << 20;
    uint8_t *p = mcdc_realloc(a->data, a->cap + grow);
    if (p == NULL) return nomem(err);
    a->data = p;
    a->cap += grow;
    return MCDC_OK;
}

/* Row r's rank (a ranked sorter's), the smallest LSN seen kept. */
static int rank_note(silver_sorter *s, const mcdc_batch *src, int64_t r, silver_rank *rk,
                     mcdc_error *err) {
    int rc = rank_of(s, src, r, rk, err);
    /* a commit's rows share their LSN: mostly one compare of a word */
    if (rc == MCDC_OK && silver_lsn10_cmp(rk->b, s->min_lsn) < 0) memcpy(s->min_lsn, rk->b, sizeof s->min_lsn);
    return rc;
}

/* Writes rank rk as a sort key ends with it: inverted (latest first), but
 * on a history's (oldest first). */
static void rank_put(const silver_sorter *s, uint8_t *d, const silver_rank *rk) {
    if (s->cfg.history) {
        memcpy(d, rk->b, SILVER_RANK_BYTES);
        return;
    }
    for (int j = 0; j < SILVER_RANK_BYTES; j++) d[j] = (uint8_t)~rk->b[j];
}

/* Appends row r of src's sort key to out: its key's bytes (*klen of them),
 * then on a ranked sorter its rank (rank_put); the smallest LSN seen kept. */
static int sort_key_append(silver_sorter *s, mcdc_buf *out, const mcdc_column *const *kc,
                           const mcdc_batch *src, int64_t r, size_t *klen, mcdc_error *err) {
    size_t off = out->len;
    int rc = silver_key_append(out, kc, s->cfg.n_keys, r, err);
    *klen = out->len - off;
    if (rc == MCDC_OK && s->cfg.ranked) {
        silver_rank rk;
        rc = rank_note(s, src, r, &rk, err);
        if (rc == MCDC_OK) rc = mcdc_buf_reserve(out, SILVER_RANK_BYTES, err);
        if (rc == MCDC_OK) {
            rank_put(s, (uint8_t *)out->data + out->len, &rk);
            out->len += SILVER_RANK_BYTES;
        }
    }
    return rc;
}

/* Notes the next n rows' keys (keys + off[i] to keys + off[i + 1]): false
 * when one does not come after the one before (then o is no longer of use).
 * Keys are encoded prefix-free (no key's bytes begin another's), so of two
 * rows of different keys the sort keys order as the keys do, whatever their
 * ranks: keys that ascend, each once, are the order of the sort keys a
 * replay needs. Only the batch's last key is copied, as the next batch's
 * first is compared with it. */
static bool order_next(order_check *o, const uint8_t *keys, const size_t *off, int64_t n) {
    if (n == 0) return true;
    const uint8_t *prev = o->have ? o->last : NULL;
    size_t plen = o->klen;
    uint64_t h = o->hash;
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *k = keys + off[i];
        size_t klen = off[i + 1] - off[i];
        if (prev && silver_key_cmp_fast(prev, plen, k, klen) >= 0) return false;
        prev = k, plen = klen;
        /* the key's bytes, a word at a time (to tell a replay that differs) */
        size_t m = klen;
        for (; m >= 8; m -= 8, k += 8) {
            uint64_t w;
            memcpy(&w, k, 8);
            h = (h ^ w) * 0x100000001b3ULL;
        }
        uint64_t w = 0;
        for (size_t j = 0; j < m; j++) w |= (uint64_t)k[j] << (8 * j);
        h = (h ^ w ^ (uint64_t)m << 56) * 0x9e3779b97f4a7c15ULL;
    }
    memcpy(o->last, prev, plen);
    o->klen = (uint32_t)plen;
    o->have = true;
    o->hash = h;
    o->rows += n;
    return true;
}

/* Sort keys and entries of rows [first, first + n) of held batch bi, which
 * are rows src_rows[0..n) (NULL: 0..n-1) of src, the batch added (its rank
 * columns are not held). */
static int key_rows(silver_sorter *s, int32_t bi, int64_t first, const mcdc_batch *src,
                    const int32_t *src_rows, int64_t n, const uint32_t *tags, mcdc_error *err) {
    int rc = grow_ents(s, n, err);
    if (rc) return rc;
    const mcdc_column *kc[SILVER_KEYS_MAX];
    for (int32_t k = 0; k < s->cfg.n_keys; k++) kc[k] = &src->columns[s->cfg.key_cols[k]];
    for (int64_t i = 0; rc == MCDC_OK && i < n; i++) {
        int64_t r = src_rows ? src_rows[i] : i;
        size_t off = s->arena.len, klen = 0;
        rc = arena_room(s, SILVER_KEY_BYTES_MAX + SILVER_RANK_BYTES, err);
        if (rc == MCDC_OK) rc = sort_key_append(s, &s->arena, kc, src, r, &klen, err);
        if (rc) break;
        const uint8_t *k = (const uint8_t *)s->arena.data + off;
        size_t len = s->arena.len - off;
        uint64_t pre, pre2;
        if (len >= 16) {
            pre = silver_be64_at(k);
            pre2 = silver_be64_at(k + 8);
        } else {
            uint8_t pad[16] = {0};
            memcpy(pad, k, len);
            pre = silver_be64_at(pad);
            pre2 = silver_be64_at(pad + 8);
        }
        s->ents[s->n_ents++] = (ent){pre, pre2, (uint32_t)bi, (uint32_t)(first + i), off, (uint32_t)len,
                                     (uint32_t)klen, tags ? tags[i] : 0, 0};
    }
    return rc;
}

static int add_acc(silver_sorter *s, mcdc_batch *b, mcdc_error *err) {
    if (s->n_acc == s->cap_acc) {
        int32_t cap = s->cap_acc ? s->cap_acc * 2 : 8;
        mcdc_batch **v = mcdc_realloc(s->acc, (size_t)cap * sizeof *v);
        if (v == NULL) return nomem(err);
        s->acc = v;
        s->cap_acc = cap;
    }
    s->acc[s->n_acc++] = b;
    return MCDC_OK;
}

/* The accumulation batch the next copied rows go to (NULL: a new one). */
static const mcdc_batch *acc_open(const silver_sorter *s) {
    if (s->n_acc == 0 || s->last_owned) return NULL;
    const mcdc_batch *acc = s->acc[s->n_acc - 1];
    return acc->columns[0].length < ACC_ROWS ? acc : NULL;
}

/* A new accumulation batch, the last held one (a full one before it is
 * shrunk to its rows). */
static int acc_new(silver_sorter *s, mcdc_error *err) {
    if (s->n_acc > 0 && !s->last_owned) mcdc_batch_shrink(s->acc[s->n_acc - 1]); /* full */
    mcdc_batch *nb = NULL;
    int rc = mcdc_batch_create(&nb, s->schema, 4096, err);
    if (rc == MCDC_OK && (rc = add_acc(s, nb, err)) != MCDC_OK) mcdc_batch_free(nb);
    if (rc == MCDC_OK) s->last_owned = false;
    return rc;
}

/* Bytes of text or binary column c's values at rows[0..n). */
static int64_t rows_bytes(const mcdc_column *c, const int32_t *rows, int64_t n) {
    int64_t bytes = 0;
    for (int64_t i = 0; i < n; i++) bytes += c->offsets[rows[i] + 1] - c->offsets[rows[i]];
    return bytes;
}

/* What copying rows[0..n) of b into accumulation batch acc adds to its
 * buffers as allocated, grown as mcdc_col_reserve grows them: the row
 * capacity doubles until the rows fit (counted with a byte of validity a
 * row, more than the bitmap takes), a bitmap is made for a column that
 * gets its first NULLs, and each text column's bytes double (from 256)
 * until the rows' own bytes fit. Exact, not an average of b's rows: one
 * doubling missed near the budget passes it by the buffer's size. */
static int64_t copy_cost(const silver_sorter *s, const mcdc_batch *acc, const mcdc_batch *b,
                         const int32_t *rows, int64_t n) {
    int64_t have = acc->columns[0].length, cap = acc->columns[0].capacity;
    int64_t grown = cap ? cap : 64;
    while (grown < have + n) grown *= 2;
    int64_t cost = 0;
    for (int32_t c = 0; c < s->n_cols; c++) {
        const mcdc_column *src = &b->columns[c], *dst = &acc->columns[c];
        int64_t per_row = mcdc_type_width(src->field) + 1 + (src->offsets ? 4 : 0);
        cost += (grown - cap) * per_row;
        if (dst->validity == NULL && src->validity && src->null_count > 0) cost += (grown + 7) / 8;
        if (src->offsets == NULL || n == 0) continue;
        int64_t dcap = dst->data ? dst->data_cap : 0;
        int64_t need = dst->data_len + rows_bytes(src, rows, n), bytes = dcap ? dcap : 256;
        if (need <= dcap) continue;
        while (bytes < need) bytes *= 2;
        if (bytes > (int64_t)MCDC_BATCH_BYTES_MAX) bytes = (int64_t)MCDC_BATCH_BYTES_MAX;
        cost += bytes - dcap;
    }
    return cost;
}

/* Is there room in the budget for copying rows[0..n) of b into acc? */
static bool room_to_copy(silver_sorter *s, const mcdc_batch *acc, const mcdc_batch *b,
                         const int32_t *rows, int64_t n) {
    return held_bytes(s) + add_cost(s, n, copy_cost(s, acc, b, rows, n)) <= s->cfg.memory_bytes;
}

/* The replay is not what was added: MCDC_E_CORRUPT. */
static int replay_differs(const silver_sorter *s, mcdc_error *err, const char *what) {
    return mcdc_error_set(err, MCDC_E_CORRUPT,
                          "the rows to sort, read again, are not those read the first time (%s, "
                          "%lld rows of %lld read again): did the input change while it was read? "
                          "Nothing was written from them; run again",
                          what, (long long)s->replayed.rows, (long long)s->rows_added);
}

/* Room for n more rows in a run's three key columns (__skey at sk, then
 * __klen and __tags), bytes of sort keys among them. */
static int keys_reserve(mcdc_column *sk, int64_t n, int64_t bytes, mcdc_error *err) {
    MCDC_ASSERT(sk[0].length == sk[1].length && sk[1].length == sk[2].length);
    int rc = mcdc_col_reserve(sk, n, bytes, err);
    if (rc == MCDC_OK) rc = mcdc_col_reserve(sk + 1, n, 0, err);
    if (rc == MCDC_OK) rc = mcdc_col_reserve(sk + 2, n, 0, err);
    return rc;
}

/* Ends key row `at`: its sort key's len bytes were written at the end of
 * sk's data; its key length and tags go next to it. The columns' lengths
 * are the caller's to set. */
static void keys_end_row(mcdc_column *sk, int64_t at, uint32_t len, uint32_t klen, uint32_t tags) {
    sk->data_len += len;
    sk->offsets[at + 1] = (int32_t)sk->data_len;
    int32_t k = (int32_t)klen, t = (int32_t)tags;
    memcpy(sk[1].values + at * 4, &k, 4);
    memcpy(sk[2].values + at * 4, &t, 4);
}

/* The keys of rows [0, n) of b (rows: rows[0..n) of b) into s->rkeys, row
 * i's from s->rkoff[i] to s->rkoff[i + 1]: a batch of one integer key
 * column in one call (silver_keys_append). */
static int batch_keys(silver_sorter *s, const mcdc_batch *b, const int32_t *rows, int64_t n,
                      mcdc_error *err) {
    if (n + 1 > s->rkoff_cap) {
        size_t *v = mcdc_realloc(s->rkoff, (size_t)(n + 1) * sizeof *v);
        if (v == NULL) return nomem(err);
        s->rkoff = v;
        s->rkoff_cap = n + 1;
    }
    const mcdc_column *kc[SILVER_KEYS_MAX];
    for (int32_t k = 0; k < s->cfg.n_keys; k++) kc[k] = &b->columns[s->cfg.key_cols[k]];
    mcdc_buf_reset(&s->rkeys);
    if (rows == NULL) return silver_keys_append(&s->rkeys, s->rkoff, kc, s->cfg.n_keys, 0, n, err);
    for (int64_t i = 0; i < n; i++) {
        s->rkoff[i] = s->rkeys.len;
        int rc = silver_key_append(&s->rkeys, kc, s->cfg.n_keys, rows[i], err);
        if (rc) return rc;
    }
    s->rkoff[n] = s->rkeys.len;
    return MCDC_OK;
}

/* The sort keys of the next replayed batch b's rows as a batch of the key
 * schema in *out (with tags, NULL: none), checked against the order. */
static int replay_keys(silver_sorter *s, const mcdc_batch *b, const uint32_t *tags, mcdc_batch **out,
                       mcdc_error *err) {
    *out = NULL;
    int64_t n = b->rows;
    int rc = batch_keys(s, b, NULL, n, err);
    size_t rank = s->cfg.ranked ? SILVER_RANK_BYTES : 0;
    mcdc_batch *kb = NULL;
    if (rc == MCDC_OK) rc = mcdc_batch_create(&kb, s->key_schema, n, err);
    if (rc == MCDC_OK) rc = keys_reserve(kb->columns, n, (int64_t)(s->rkeys.len + (size_t)n * rank), err);
    if (rc == MCDC_OK && !order_next(&s->replayed, (const uint8_t *)s->rkeys.data, s->rkoff, n))
        rc = replay_differs(s, err, "a row out of order");
    mcdc_column *sk = rc == MCDC_OK ? kb->columns : NULL;
    for (int64_t r = 0; rc == MCDC_OK && r < n; r++) {
        const uint8_t *k = (const uint8_t *)s->rkeys.data + s->rkoff[r];
        uint32_t klen = (uint32_t)(s->rkoff[r + 1] - s->rkoff[r]);
        uint8_t *d = sk->data + sk->data_len;
        memcpy(d, k, klen);
        silver_rank rk;
        if (rank && (rc = rank_note(s, b, r, &rk, err)) != MCDC_OK) break;
        if (rank) rank_put(s, d + klen, &rk);
        keys_end_row(sk, r, klen + (uint32_t)rank, klen, tags ? tags[r] : 0);
    }
    if (rc == MCDC_OK) {
        sk->length = sk[1].length = sk[2].length = n;
        rc = mcdc_batch_seal(kb, err);
    }
    if (rc == MCDC_OK) *out = kb;
    else mcdc_batch_free(kb);
    return rc;
}

/* A replayed sorter's rows [0, n) of b (rows NULL: all of them; else
 * those rows): checked to come in order, ranked (a NULL rank column is
 * refused), counted, then let go. */
static int replay_add(silver_sorter *s, const mcdc_batch *b, const int32_t *rows, int64_t n,
                      mcdc_error *err) {
    MCDC_ASSERT(!s->broke);
    int rc = batch_keys(s, b, rows, n, err);
    if (rc == MCDC_OK && !order_next(&s->added, (const uint8_t *)s->rkeys.data, s->rkoff, n)) {
        s->broke = true;
        rc = mcdc_error_set(err, MCDC_E_CANCELLED, "rows out of key order: they cannot be replayed");
    }
    for (int64_t i = 0; rc == MCDC_OK && s->cfg.ranked && i < n; i++) {
        silver_rank rk;
        rc = rank_note(s, b, rows ? rows[i] : i, &rk, err);
    }
    if (rc == MCDC_OK) s->rows_added += n;
    return rc;
}

int silver_sorter_add(silver_sorter *s, const mcdc_batch *b, const int32_t *rows, int64_t n,
                      const uint32_t *tags, mcdc_error *err) {
    MCDC_ASSERT(!s->finished && b->schema->n_fields == s->cfg.schema->n_fields);
    if (rows == NULL) n = b->rows;
    if (s->replay) return replay_add(s, b, rows, n, err);
    int rc = MCDC_OK;
    int64_t done = 0;
    int32_t *all = NULL;
    if (rows == NULL && n > 0) {
        all = mcdc_malloc((size_t)n * sizeof *all);
        if (all == NULL) return nomem(err);
        for (int64_t i = 0; i < n; i++) all[i] = (int32_t)i;
        rows = all;
    }
    while (rc == MCDC_OK && done < n) {
        /* the batch the rows go to first, held and counted: a new batch
         * of the schema may come with the buffers of one freed before
         * (the schema's pool), which the room below must see */
        if (acc_open(s) == NULL && (rc = acc_new(s, err)) != MCDC_OK) break;
        mcdc_batch *acc = s->acc[s->n_acc - 1];
        /* as many rows as the budget has room for; none: spill first. A
         * budget without room for a row when nothing is held (below what
         * the first rows' buffers take, about 2 MB) holds an accumulation
         * batch's worth at a time */
        int64_t first = acc->columns[0].length;
        int64_t most = n - done, left = ACC_ROWS - first;
        if (most > left) most = left;
        int64_t fit = most;
        while (fit > 1 && !room_to_copy(s, acc, b, rows + done, fit)) fit /= 2;
        if (!room_to_copy(s, acc, b, rows + done, fit)) {
            if (s->n_ents > 0) {
                rc = spill_run(s, err);
                continue;
            }
            fit = most;
        }
        for (int32_t c = 0; rc == MCDC_OK && c < s->n_cols; c++)
            rc = mcdc_col_take(&acc->columns[c], &b->columns[c], rows + done, fit, err);
        if (rc == MCDC_OK)
            rc = key_rows(s, s->n_acc - 1, first, b, rows + done, fit, tags ? tags + done : NULL, err);
        done += fit;
        s->rows_added += fit;
        if (rc == MCDC_OK && over_budget(s)) rc = spill_run(s, err);
    }
    mcdc_free(all);
    return rc;
}

int silver_sorter_add_owned(silver_sorter *s, mcdc_batch *b, const uint32_t *tags,
                            mcdc_error *err) {
    MCDC_ASSERT(!s->finished && b->schema->n_fields == s->cfg.schema->n_fields);
    if (s->replay) {
        int rc = replay_add(s, b, NULL, b->rows, err);
        mcdc_batch_free(b);
        return rc;
    }
    /* what holding b as it is takes: more than half the budget, and it is
     * copied in parts instead, spilled between them */
    int64_t cost = b->rows >= OWNED_ROWS_MIN ? add_cost(s, b->rows, mcdc_batch_cap_bytes(b)) : 0;
    if (b->rows < OWNED_ROWS_MIN || 2 * cost > s->cfg.memory_bytes) {
        /* a stream's small commit is copied too, so that held batches stay few */
        int rc = silver_sorter_add(s, b, NULL, 0, tags, err);
        mcdc_batch_free(b);
        return rc;
    }
    if (s->n_ents > 0 && held_bytes(s) + cost > s->cfg.memory_bytes) {
        int rc = spill_run(s, err);
        if (rc) {
            mcdc_batch_free(b);
            return rc;
        }
    }
    /* keyed and ranked first (the rank columns go next), then held as it is:
     * a held batch must take no more rows, so it is marked full */
    int64_t n = b->rows, n0 = s->n_ents;
    size_t a0 = s->arena.len;
    int rc = key_rows(s, s->n_acc, 0, b, NULL, n, tags, err);
    mcdc_batch *held = b;
    if (rc == MCDC_OK && s->n_cols < s->cfg.schema->n_fields) {
        rc = mcdc_batch_reshape(&held, b, s->schema, s->held_of, err); /* takes b */
        b = NULL;
    }
    if (rc == MCDC_OK) {
        mcdc_batch_shrink(held);
        rc = add_acc(s, held, err);
    }
    if (rc) { /* nothing of b stays: its entries go */
        s->n_ents = n0;
        s->arena.len = a0;
        mcdc_batch_free(held); /* b, or NULL when the reshape took b */
        return rc;
    }
    s->rows_added += n;
    s->last_owned = true; /* copies go to a batch of their own */
    if (rc == MCDC_OK && over_budget(s)) rc = spill_run(s, err);
    return rc;
}

/* ---- sorting what is held -------------------------------------------------------- */

/* qsort takes no context: the arena of the sort running on this thread. */
static _Thread_local const uint8_t *t_arena;

static int ent_cmp(const void *pa, const void *pb) {
    const ent *a = pa, *b = pb;
    if (a->pre != b->pre) return a->pre < b->pre ? -1 : 1;
    if (a->pre2 != b->pre2) return a->pre2 < b->pre2 ? -1 : 1;
    /* the first 16 bytes are equal (zero padding included: a shorter key's
     * are its own bytes, so only whole keys can settle it then) */
    if (a->len >= 16 && b->len >= 16)
        return silver_key_cmp_fast(t_arena + a->off + 16, a->len - 16, t_arena + b->off + 16, b->len - 16);
    return silver_key_cmp_fast(t_arena + a->off, a->len, t_arena + b->off, b->len);
}

/* Byte d (0..15) of an entry's 16 prefix bytes. */
static inline unsigned digit(const ent *e, int d) {
    uint64_t w = d < 8 ? e->pre : e->pre2;
    return (unsigned)(w >> (56 - 8 * (d & 7))) & 0xFFu;
}

/* Entries of equal prefixes in full order: a few rows of one key (its
 * ranks) by insertion, longer runs (keys alike past 16 bytes) by qsort.
 * Both keep equal sort keys in the order they came, as the radix passes. */
static void sort_ties(ent *v, int64_t n) {
    if (n > 16) {
        qsort(v, (size_t)n, sizeof *v, ent_cmp);
        return;
    }
    for (int64_t i = 1; i < n; i++) {
        ent x = v[i];
        int64_t j = i;
        for (; j > 0 && ent_cmp(&v[j - 1], &x) > 0; j--) v[j] = v[j - 1];
        v[j] = x;
    }
}

/* Sorts the held entries by their prefixes, least significant byte first
 * (a stable pass per byte; bytes every entry shares are skipped: a one-int
 * key and its rank vary in few), then runs of equal prefixes by whole sort
 * keys. Without memory for the second array: qsort. */
static void sort_ents(silver_sorter *s) {
    int64_t n = s->n_ents;
    t_arena = (const uint8_t *)s->arena.data;
    if (n < 2) return;
    ent *tmp = mcdc_malloc((size_t)n * sizeof *tmp);
    if (tmp == NULL) {
        qsort(s->ents, (size_t)n, sizeof *s->ents, ent_cmp);
        return;
    }
    static _Thread_local int64_t cnt[16][256];
    memset(cnt, 0, sizeof cnt);
    for (int64_t i = 0; i < n; i++) {
        const ent *e = &s->ents[i];
        for (int d = 0; d < 16; d++) cnt[d][digit(e, d)]++;
    }
    ent *src = s->ents, *dst = tmp;
    for (int d = 15; d >= 0; d--) {
        int64_t *c = cnt[d];
        if (c[digit(&src[0], d)] == n) continue; /* one value: nothing moves */
        int64_t at = 0;
        for (int v = 0; v < 256; v++) {
            int64_t k = c[v];
            c[v] = at;
            at += k;
        }
        MCDC_ASSERT(at == n);
        for (int64_t i = 0; i < n; i++) dst[c[digit(&src[i], d)]++] = src[i];
        ent *t = src;
        src = dst;
        dst = t;
    }
    /* src holds the order: keep that array, free the other */
    if (src == tmp) s->cap_ents = n; /* tmp has room for n */
    s->ents = src;
    mcdc_free(dst);
    for (int64_t i = 0; i < n;) {
        int64_t j = i + 1;
        while (j < n && src[j].pre == src[i].pre && src[j].pre2 == src[i].pre2) j++;
        if (j - i > 1) sort_ties(src + i, j - i);
        i = j;
    }
    for (int64_t i = 1; i < n; i++) MCDC_ASSERT(ent_cmp(&src[i - 1], &src[i]) <= 0);
}

/* Do two sorted entries have one key? A key of at most 16 bytes is in their
 * prefixes (its own bytes: the padding only follows the sort key), so most
 * are settled without a look at the arena. */
static inline bool same_key(const ent *x, const ent *y, const uint8_t *arena) {
    uint32_t k = x->klen;
    if (k != y->klen) return false;
    if (k > 16) return memcmp(arena + x->off, arena + y->off, k) == 0;
    uint64_t m1 = k >= 8 ? ~0ULL : k == 0 ? 0 : ~0ULL << (64 - 8 * k);
    uint64_t m2 = k <= 8 ? 0 : k == 16 ? ~0ULL : ~0ULL << (64 - 8 * (k - 8));
    return ((x->pre ^ y->pre) & m1) == 0 && ((x->pre2 ^ y->pre2) & m2) == 0;
}

/* ---- keys that are not unique (unique_keys) ------------------------------------ */

/* The rank in a sort key of klen key bytes (inverted there unless a
 * history's). */
static void sort_rank(const silver_sorter *s, const uint8_t *sk, uint32_t klen, silver_rank *out) {
    memcpy(out->b, sk + klen, SILVER_RANK_BYTES);
    if (!s->cfg.history)
        for (int j = 0; j < SILVER_RANK_BYTES; j++) out->b[j] = (uint8_t)~out->b[j];
}

/* A snapshot row's rank: operation 0, no command id, no seqval. */
static bool snapshot_rank(const silver_rank *r) {
    return silver_rank_op(r) == 0 && r->b[10] == 0 && r->b[15] == 0;
}

typedef enum { TIE_NONE = 0, TIE_SNAPSHOT, TIE_INSERTS } tie_kind;

/* What two neighbouring rows of one key prove, x the newer; top: no later
 * row of the key outranks x. Equal ranks are legitimate but for snapshot
 * rows (an update's 3 and 4 differ in their operation, a key update's
 * delete and insert in their keys); a repair's rows (4 or 1) never insert.
 * Two inserts of one key with nothing of it between them, in one
 * transaction or two, are two rows of the source under one key: a unique
 * key is deleted before it is inserted again. (Not an insert after an
 * update: the simulator's bulk loads update keys they insert later in the
 * transaction; nor an insert after a snapshot row, which a snapshot read
 * after the insert holds.) Equal ranks are one change written twice. Only
 * held rows are checked so: a spilled run keeps a key's latest row, and the
 * delete between two runs' inserts is not in it. */
static tie_kind tie_of(const silver_rank *x, const silver_rank *y, bool top) {
    if (memcmp(x->b, y->b, SILVER_RANK_BYTES) == 0)
        return top && snapshot_rank(x) ? TIE_SNAPSHOT : TIE_NONE;
    if (silver_rank_op(x) == 2 && silver_rank_op(y) == 2) return TIE_INSERTS;
    return TIE_NONE;
}

/* MCDC_E_NOT_UNIQUE for the key of row `row` of b (the sorter's columns
 * first), at LSN at. */
static int not_unique(const silver_sorter *s, tie_kind kind, const silver_rank *at,
                      const mcdc_batch *b, int64_t row, mcdc_error *err) {
    mcdc_buf names = {0}, value = {0};
    int32_t n = s->cfg.n_keys;
    const mcdc_column *kc[SILVER_KEYS_MAX];
    for (int32_t k = 0; k < n; k++) {
        kc[k] = &b->columns[s->cfg.key_cols[k]];
        mcdc_buf_printf(&names, NULL, "%s%s", k ? ", " : "", s->schema->fields[s->cfg.key_cols[k]].name);
    }
    silver_key_text(&value, kc, n, row);
    char lsn[MCDC_LSN_TEXT_LEN + 1];
    mcdc_lsn l = mcdc_lsn_from_bytes(at->b);
    mcdc_lsn_format(&l, lsn);
    const char *nm = names.data ? (const char *)names.data : "", *v = value.data ? (const char *)value.data : "";
    int vl = (int)value.len;
    const char *open = n > 1 ? "(" : "", *close = n > 1 ? ")" : "";
    int rc = kind == TIE_SNAPSHOT
                 ? mcdc_error_set(err, MCDC_E_NOT_UNIQUE,
                                  "the key (%s) is not unique: bronze holds two snapshot rows of "
                                  "%s%s%s = %s%.*s%s at LSN %s, and a snapshot reads each row of "
                                  "the table once. This pass applied nothing: give apply the "
                                  "table's real unique key (--keys, or the capture instance's "
                                  "unique index through the source options)",
                                  nm, open, nm, close, open, vl, v, close, lsn)
                 : mcdc_error_set(err, MCDC_E_NOT_UNIQUE,
                                  "the key (%s) is not unique: bronze holds two inserts of %s%s%s "
                                  "= %s%.*s%s (the later at LSN %s) with no delete of it between "
                                  "them. This pass applied nothing: give apply the table's real "
                                  "unique key (--keys, or the capture instance's unique index "
                                  "through the source options)",
                                  nm, open, nm, close, open, vl, v, close, lsn);
    mcdc_buf_free(&names);
    mcdc_buf_free(&value);
    return rc;
}

/* Held neighbours x (newer) and y of one key, sorted (only keys with more
 * than one row in the pass come here). */
static int held_pair(const silver_sorter *s, const ent *x, const ent *y, bool top, mcdc_error *err) {
    const uint8_t *a = (const uint8_t *)s->arena.data;
    silver_rank rx, ry;
    sort_rank(s, a + x->off, x->klen, &rx);
    sort_rank(s, a + y->off, y->klen, &ry);
    tie_kind k = tie_of(&rx, &ry, top);
    return k ? not_unique(s, k, &rx, s->acc[y->batch], y->row, err) : MCDC_OK;
}

/* A history's held rows, a key's oldest first: every neighbouring pair. */
static int history_ties(const silver_sorter *s, mcdc_error *err) {
    const uint8_t *a = (const uint8_t *)s->arena.data;
    int rc = MCDC_OK;
    for (int64_t i = 1; rc == MCDC_OK && i < s->n_ents; i++) {
        const ent *y = &s->ents[i - 1], *x = &s->ents[i];
        if (!same_key(y, x, a)) continue;
        bool top = i + 1 == s->n_ents || !same_key(x, &s->ents[i + 1], a);
        rc = held_pair(s, x, y, top, err);
    }
    return rc;
}

/* Sorts the held entries, then (ranked) keeps each key's first with the
 * tags of all its rows; with unique_keys, each row is checked against the
 * one before it of its key (the cut compares their keys already). */
static int sort_held(silver_sorter *s, mcdc_error *err) {
    sort_ents(s);
    if (!s->cfg.ranked) return MCDC_OK;
    if (s->cfg.history) return s->cfg.unique_keys ? history_ties(s, err) : MCDC_OK;
    const uint8_t *a = (const uint8_t *)s->arena.data;
    bool check = s->cfg.unique_keys, top = false;
    int64_t w = 0;
    for (int64_t i = 0; i < s->n_ents; i++) {
        ent *e = &s->ents[i];
        if (w > 0) {
            ent *last = &s->ents[w - 1];
            bool same = same_key(last, e, a);
            if (same) {
                /* ents[i - 1] is still the entry before e: the cut writes
                 * at w - 1 and w, never past i - 1 */
                int rc = check ? held_pair(s, &s->ents[i - 1], e, top, err) : MCDC_OK;
                if (rc) return rc;
                top = false;
                last->tags |= e->tags;
                continue;
            }
        }
        top = true;
        s->ents[w++] = *e;
    }
    s->n_ents = w;
    return MCDC_OK;
}

static void free_held(silver_sorter *s) {
    for (int32_t i = 0; i < s->n_acc; i++) mcdc_batch_free(s->acc[i]);
    s->n_acc = 0;
    s->last_owned = false;
    s->n_ents = 0;
    mcdc_buf_free(&s->arena);
}

/* Appends held entries [from, to) to out (the run schema, or the sorter's
 * when keys are not wanted): a gather per column. */
static int take_held(silver_sorter *s, mcdc_batch *out, int64_t from, int64_t to, bool with_keys,
                     mcdc_error *err) {
    int64_t n = to - from;
    int32_t *which = mcdc_malloc((size_t)(n ? n : 1) * sizeof *which);
    const mcdc_column **src = mcdc_malloc((size_t)(s->n_acc ? s->n_acc : 1) * sizeof *src);
    int rc = which && src ? MCDC_OK : nomem(err);
    for (int64_t i = 0; rc == MCDC_OK && i < n; i++) {
        which[i] = (int32_t)s->ents[from + i].batch;
        s->idx[i] = (int32_t)s->ents[from + i].row;
    }
    for (int32_t c = 0; rc == MCDC_OK && c < s->n_cols; c++) {
        for (int32_t b = 0; b < s->n_acc; b++) src[b] = &s->acc[b]->columns[c];
        rc = mcdc_col_gather(&out->columns[c], src, which, s->idx, n, err);
    }
    mcdc_free(which);
    mcdc_free(src);
    if (rc || !with_keys || n == 0) return rc;
    /* the three key columns filled straight from the entries, room made once */
    const uint8_t *a = (const uint8_t *)s->arena.data;
    mcdc_column *sk = &out->columns[s->n_cols];
    int64_t bytes = 0;
    for (int64_t i = from; i < to; i++) bytes += s->ents[i].len;
    if ((rc = keys_reserve(sk, n, bytes, err)) != MCDC_OK) return rc;
    int64_t at = sk->length;
    for (int64_t i = 0; i < n; i++) {
        const ent *e = &s->ents[from + i];
        memcpy(sk->data + sk->data_len, a + e->off, e->len);
        keys_end_row(sk, at + i, e->len, e->klen, e->tags);
    }
    sk->length = sk[1].length = sk[2].length = at + n;
    return MCDC_OK;
}

/* A frame's pieces go straight from the batch to the run's file. */
static int run_sink(void *ctx, const void *p, size_t n, mcdc_error *err) {
    return mcdc_storage_writer_write(ctx, p, n, err);
}

/* A new run's file: numbered in the order written (a merged run takes the
 * next number too, so names never repeat). */
static char *run_key(silver_sorter *s) {
    return mcdc_asprintf("%s%s-run-%04d.frames", s->cfg.spill_prefix, s->id, (int)s->run_seq++);
}

/* Writes the rows of rb (the sorter's columns 0..n_cols-1) with their sort
 * keys (kb's three columns from kfirst: __skey, __klen, __tags) to w as
 * frame pairs of up to RUN_READ_ROWS rows. */
static int write_pairs(silver_sorter *s, mcdc_storage_writer *w, const mcdc_batch *kb,
                       int32_t kfirst, const mcdc_batch *rb, mcdc_error *err) {
    MCDC_ASSERT(kb->rows == rb->rows);
    int rc = MCDC_OK;
    for (int64_t r = 0; rc == MCDC_OK && r < rb->rows; r += RUN_READ_ROWS) {
        int64_t n = rb->rows - r < RUN_READ_ROWS ? rb->rows - r : RUN_READ_ROWS;
        rc = mcdc_frame_write(kb, kfirst, 3, r, n, run_sink, w, err);
        if (rc == MCDC_OK) rc = mcdc_frame_write(rb, 0, s->n_cols, r, n, run_sink, w, err);
    }
    return rc;
}

static int merge_runs(silver_sorter *s, int32_t from, mcdc_error *err);

/* Runs past the most read at once (runs_max): the runs of the lowest level,
 * at the end of runs[], become one of the next level (all of them when
 * that one run is alone there). Nothing is merged below runs_max, where
 * reading takes them all; past it a row is rewritten about once a level,
 * and a level holds up to runs_max runs of the one below. */
static int tier_runs(silver_sorter *s, mcdc_error *err) {
    if (s->n_runs < s->cfg.runs_max) return MCDC_OK;
    int32_t last = s->n_runs - 1, from = last;
    while (from > 0 && s->level[from - 1] == s->level[last]) from--;
    return merge_runs(s, from < last ? from : 0, err);
}

static int spill_run(silver_sorter *s, mcdc_error *err) {
    int rc = sort_held(s, err);
    if (rc) return rc;
    if (s->n_runs == s->cap_runs) {
        int32_t cap = s->cap_runs ? s->cap_runs * 2 : 8;
        char **v = mcdc_realloc(s->runs, (size_t)cap * sizeof *v);
        if (v == NULL) return nomem(err);
        s->runs = v;
        s->cap_runs = cap;
    }
    MCDC_ASSERT(s->n_runs < s->cfg.runs_max); /* merged into one when they reach it */
    char *key = run_key(s);
    if (key == NULL) return nomem(err);
    mcdc_storage_writer *w = NULL;
    rc = mcdc_storage_writer_open(&w, s->cfg.spill, key, err);
    mcdc_batch *b = NULL;
    /* gathered in large batches (measured: a gather of 8192 rows costs a
     * third more per row than one of 65536), written as pairs of the
     * reader's size */
    _Static_assert(SILVER_BATCH_ROWS % RUN_READ_ROWS == 0 && RUN_READ_ROWS % 8 == 0,
                   "a run's frames slice its batches at bitmap bytes");
    for (int64_t i = 0; rc == MCDC_OK && i < s->n_ents; i += SILVER_BATCH_ROWS) {
        int64_t to = i + SILVER_BATCH_ROWS < s->n_ents ? i + SILVER_BATCH_ROWS : s->n_ents;
        rc = mcdc_batch_create(&b, s->run_schema, to - i, err);
        if (rc == MCDC_OK) rc = take_held(s, b, i, to, true, err);
        if (rc == MCDC_OK) rc = mcdc_batch_seal(b, err);
        if (rc == MCDC_OK) rc = write_pairs(s, w, b, s->n_cols, b, err);
        mcdc_batch_free(b);
        b = NULL;
    }
    /* a run is this pass's scratch data: a crash leaves it to the next
     * apply's cleanup, so it needs no fsync */
    if (rc == MCDC_OK) rc = mcdc_storage_writer_commit(w, MCDC_STORAGE_PUT_SCRATCH, err);
    else mcdc_storage_writer_abort(w);
    if (rc) {
        mcdc_free(key);
        return mcdc_error_wrap(err, "spilling sorted rows to %s", s->cfg.spill_prefix), rc;
    }
    s->level[s->n_runs] = 0;
    s->runs[s->n_runs++] = key;
    s->spilled++;
    free_held(s);
    return tier_runs(s, err);
}

int silver_sorter_finish(silver_sorter *s, mcdc_error *err) {
    if (s->replay) { /* nothing held: every row comes from the replay */
        s->replaying = s->finished = !s->broke;
        return s->broke ? mcdc_error_set(err, MCDC_E_CANCELLED, "rows out of key order") : MCDC_OK;
    }
    int rc = s->finished ? MCDC_OK : sort_held(s, err);
    s->finished = rc == MCDC_OK;
    return rc;
}

/* ---- reading ---------------------------------------------------------------------- */

/* A run's batches stay alive until the chunk that took rows from them is
 * built: they are retired, not freed, when the run moves on. A chunk ends
 * early once this many are retired. */
#define RETIRED_MAX 16

static void free_retired(silver_sorter *s) {
    for (int32_t i = 0; i < s->n_retired; i++) mcdc_batch_free(s->retired[i]);
    s->n_retired = 0;
}

static void close_cursors(silver_sorter *s) {
    for (int32_t i = 0; i < s->n_cur; i++) {
        mcdc_batch_free(s->cur[i].b);
        mcdc_batch_free(s->cur[i].kb);
        mcdc_free(s->cur[i].r);
    }
    free_retired(s);
    mcdc_free(s->cur);
    s->cur = NULL;
    s->n_cur = 0;
    s->n_heap = 0;
}

/* A winner tied by the next row of its key (another run's): the same sort
 * key, proof when it is a snapshot row's. */
static int run_tie(const silver_sorter *s, const uint8_t *k, uint32_t klen, const mcdc_batch *src,
                   int64_t row, mcdc_error *err) {
    silver_rank r;
    sort_rank(s, k, klen, &r);
    return snapshot_rank(&r) ? not_unique(s, TIE_SNAPSHOT, &r, src, row, err) : MCDC_OK;
}

/* A history's rows come out every one, oldest first: the row just out
 * (k, at row of src), now that the heap's top is the next row, ties the
 * row before it when tie_pending, and proves the key is not unique when
 * nothing of its key comes after it. */
static int history_run_tie(silver_sorter *s, const uint8_t *k, uint32_t klen, uint32_t len,
                           const mcdc_batch *src, int64_t row, mcdc_error *err);

/* Caches cursor c's current sort key (live false: exhausted). */
static void cur_fill(const silver_sorter *s, cursor *c) {
    if (c->is_run) {
        c->live = c->b != NULL;
        if (!c->live) return;
        const mcdc_batch *kb = c->kb ? c->kb : c->b;
        int32_t base = s->keys_only || c->kb ? 0 : s->n_cols;
        const mcdc_column *sk = &kb->columns[base];
        c->k = sk->data + sk->offsets[c->at];
        c->len = (uint32_t)(sk->offsets[c->at + 1] - sk->offsets[c->at]);
        c->klen = (uint32_t)cell_i32(&kb->columns[base + 1], c->at);
        c->tags = (uint32_t)cell_i32(&kb->columns[base + 2], c->at);
        return;
    }
    c->live = c->pos < s->n_ents;
    if (!c->live) return;
    const ent *e = &s->ents[c->pos];
    c->k = (const uint8_t *)s->arena.data + e->off;
    c->len = e->len;
    c->klen = e->klen;
    c->tags = e->tags;
}

/* A run's file on disk is trusted no more than any other: what it holds
 * is MCDC_E_CORRUPT naming the file and the frame pair. A run is scratch
 * data of this pass, rewritten by the next one. */
#define RUN_ADVICE "; run the apply again (it spills afresh), and check the disk if this recurs"
static int run_corrupt(const silver_sorter *s, const run_reader *r, mcdc_error *err,
                       const char *what) {
    return mcdc_error_set(err, MCDC_E_CORRUPT, "spilled run %s/%s, frame pair %lld at byte %lld: %s" RUN_ADVICE,
                          s->cfg.spill->root, r->key, (long long)r->frame, (long long)r->at, what);
}

/* A frame's own refusal (mcdc_frame_head, mcdc_frame_decode: what is
 * wrong in it) said as run_corrupt does. Other failures (memory) pass. */
static int in_run(const silver_sorter *s, const run_reader *r, mcdc_error *err, int rc) {
    if (rc != MCDC_E_CORRUPT) return rc;
    char what[MCDC_ERROR_MESSAGE_MAX];
    snprintf(what, sizeof what, "%s", err->message);
    return run_corrupt(s, r, err, what);
}

/* Reads len bytes at r->at + from into s->io at from, where what was read
 * of the pair ends (the file must hold them). */
static int run_read(silver_sorter *s, run_reader *r, size_t from, size_t len, mcdc_error *err) {
    MCDC_ASSERT(from == s->io.len);
    if ((int64_t)(from + len) > r->size - r->at)
        return run_corrupt(s, r, err, "the file ends inside it (truncated)");
    size_t got = 0;
    int rc = mcdc_buf_reserve(&s->io, from + len - s->io.len, err);
    if (rc == MCDC_OK)
        rc = mcdc_storage_get_range(s->cfg.spill, r->key, r->at + (int64_t)from, len,
                                    s->io.data + from, &got, NULL, err);
    if (rc == MCDC_OK && got != len) return run_corrupt(s, r, err, "the file ends inside it (truncated)");
    if (rc == MCDC_OK) s->io.len = from + len;
    return rc;
}

/* The next frame pair of run r as a batch (*out; NULL at the run's end):
 * the run's schema, or keys_only the key schema, whose rows frame is only
 * skipped. Reads: the keys frame's head, then its body with the rows
 * frame's head, then (not keys_only) the rows frame's body. */
static int run_next(silver_sorter *s, run_reader *r, mcdc_batch **out, mcdc_error *err) {
    *out = NULL;
    if (r->at == r->size) return MCDC_OK;
    size_t kh = mcdc_frame_head_bytes(3), rh = mcdc_frame_head_bytes(s->n_cols);
    int64_t krows = 0, kbody = 0, rrows = 0, rbody = 0;
    mcdc_buf_reset(&s->io);
    /* a pair holds a batch's columns, each up to the batch limit (what is
     * read is bounded by the file: its size is checked first) */
    s->io.limit = (size_t)MCDC_BATCH_BYTES_MAX * (size_t)(s->n_cols + 3);
    int rc = run_read(s, r, 0, kh, err);
    if (rc == MCDC_OK) rc = in_run(s, r, err, mcdc_frame_head(s->io.data, 3, &krows, &kbody, err));
    if (rc == MCDC_OK && kbody > r->size) rc = run_corrupt(s, r, err, "the file ends inside its keys frame (truncated)");
    if (rc == MCDC_OK) rc = run_read(s, r, kh, (size_t)kbody + rh, err);
    size_t rat = kh + (size_t)kbody; /* the rows frame */
    if (rc == MCDC_OK)
        rc = in_run(s, r, err, mcdc_frame_head(s->io.data + rat, s->n_cols, &rrows, &rbody, err));
    if (rc == MCDC_OK && rrows != krows)
        rc = run_corrupt(s, r, err, "its keys and rows frames hold different row counts");
    if (rc == MCDC_OK && rbody > r->size - r->at - (int64_t)(rat + rh))
        rc = run_corrupt(s, r, err, "the file ends inside its rows frame (truncated)");
    if (rc == MCDC_OK && !s->keys_only) rc = run_read(s, r, rat + rh, (size_t)rbody, err);
    mcdc_batch *b = NULL;
    if (rc == MCDC_OK)
        rc = mcdc_batch_create(&b, s->keys_only ? s->key_schema : s->run_schema, krows, err);
    const uint8_t *io = s->io.data;
    if (rc == MCDC_OK)
        rc = in_run(s, r, err, mcdc_frame_decode(b, s->keys_only ? 0 : s->n_cols, 3, io, io + kh,
                                                 (size_t)kbody, err));
    if (rc == MCDC_OK && !s->keys_only)
        rc = in_run(s, r, err, mcdc_frame_decode(b, 0, s->n_cols, io + rat, io + rat + rh,
                                                 (size_t)rbody, err));
    if (rc == MCDC_OK) rc = mcdc_batch_seal(b, err);
    if (rc) {
        mcdc_batch_free(b);
        return rc;
    }
    r->at += (int64_t)(rat + rh) + rbody;
    r->frame++;
    *out = b;
    return MCDC_OK;
}

static int retire(silver_sorter *s, mcdc_batch **b, mcdc_error *err) {
    if (*b == NULL) return MCDC_OK;
    if (s->n_retired == s->cap_retired) {
        int32_t cap = s->cap_retired ? s->cap_retired * 2 : 8;
        mcdc_batch **v = mcdc_realloc(s->retired, (size_t)cap * sizeof *v);
        if (v == NULL) return nomem(err);
        s->retired = v;
        s->cap_retired = cap;
    }
    s->retired[s->n_retired++] = *b;
    *b = NULL;
    return MCDC_OK;
}

/* The replay's next batch into cursor c: its rows (keys_only: none) and
 * their sort keys apart, checked against the order and, at the end,
 * against what was added (the count and the keys). */
static int replay_load(silver_sorter *s, cursor *c, mcdc_error *err) {
    int rc = MCDC_OK;
    for (;;) {
        mcdc_batch *b = NULL;
        const uint32_t *tags = NULL;
        rc = s->replay(s->replay_ctx, s->replay_restart, &b, &tags, err);
        s->replay_restart = false;
        if (rc) return rc;
        if (b == NULL) {
            if (s->replayed.rows != s->rows_added) return replay_differs(s, err, "another row count");
            if (s->replayed.hash != s->added.hash) return replay_differs(s, err, "other keys");
            return MCDC_OK;
        }
        if (b->rows == 0) {
            mcdc_batch_free(b);
            continue;
        }
        mcdc_batch *kb = NULL;
        rc = replay_keys(s, b, tags, &kb, err);
        if (rc == MCDC_OK && s->keys_only) {
            mcdc_batch_free(b);
            b = kb, kb = NULL;
        } else if (rc == MCDC_OK && s->n_cols < s->cfg.schema->n_fields) {
            rc = mcdc_batch_reshape(&b, b, s->schema, s->held_of, err); /* takes b */
        }
        if (rc) {
            mcdc_batch_free(b);
            mcdc_batch_free(kb);
            return rc;
        }
        c->b = b;
        c->kb = kb;
        return MCDC_OK;
    }
}

/* Loads a run cursor's next batch (NULL at its end), retiring the last. */
static int cur_load(silver_sorter *s, cursor *c, mcdc_error *err) {
    int rc = retire(s, &c->b, err);
    if (rc == MCDC_OK) rc = retire(s, &c->kb, err);
    if (rc) return rc;
    c->at = 0;
    if (c->r == NULL) return replay_load(s, c, err);
    do {
        mcdc_batch_free(c->b);
        c->b = NULL;
        rc = run_next(s, c->r, &c->b, err);
    } while (rc == MCDC_OK && c->b && c->b->rows == 0);
    return rc;
}

/* Held rows are read in key order, their sort keys scattered over the
 * arena in arrival order: the key this many entries on is touched first,
 * so that it is in the cache by the time the merge compares it. */
#define HELD_AHEAD 16

static int cur_step(silver_sorter *s, cursor *c, mcdc_error *err) {
    int rc = MCDC_OK;
    if (!c->is_run) {
        if (++c->pos + HELD_AHEAD < s->n_ents)
            __builtin_prefetch((const uint8_t *)s->arena.data + s->ents[c->pos + HELD_AHEAD].off);
    } else if (++c->at >= c->b->rows) {
        rc = cur_load(s, c, err);
    }
    if (rc == MCDC_OK) cur_fill(s, c);
    return rc;
}

static bool heap_less(const silver_sorter *s, int32_t a, int32_t b) {
    const cursor *x = &s->cur[a], *y = &s->cur[b];
    int c = silver_key_cmp_fast(x->k, x->len, y->k, y->len);
    return c < 0 || (c == 0 && a < b);
}

static void heap_down(silver_sorter *s, int32_t i) {
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < s->n_heap && heap_less(s, s->heap[l], s->heap[m])) m = l;
        if (r < s->n_heap && heap_less(s, s->heap[r], s->heap[m])) m = r;
        if (m == i) return;
        int32_t t = s->heap[i];
        s->heap[i] = s->heap[m];
        s->heap[m] = t;
        i = m;
    }
}

/* Steps the heap's top cursor past its row and restores the heap. */
static int heap_pop_step(silver_sorter *s, mcdc_error *err) {
    cursor *t = &s->cur[s->heap[0]];
    int rc = cur_step(s, t, err);
    if (rc) return rc;
    if (!t->live) s->heap[0] = s->heap[--s->n_heap];
    if (s->n_heap > 0) heap_down(s, 0);
    return MCDC_OK;
}

/* Cursors on runs[first_run..] and (with_held) what is held, their heap
 * built. */
static int open_cursors(silver_sorter *s, bool keys_only, int32_t first_run, bool with_held,
                        mcdc_error *err) {
    close_cursors(s);
    s->keys_only = keys_only;
    s->defer_rows = false;
    s->tie_pending = false;
    s->cur = mcdc_calloc((size_t)s->n_runs + 2, sizeof *s->cur);
    mcdc_free(s->heap);
    s->heap = mcdc_calloc((size_t)s->n_runs + 2, sizeof *s->heap);
    if (s->cur == NULL || s->heap == NULL) return nomem(err);
    int rc = MCDC_OK;
    for (int32_t i = first_run; i < s->n_runs && rc == MCDC_OK; i++) {
        cursor *c = &s->cur[s->n_cur++];
        c->is_run = true;
        if ((c->r = mcdc_calloc(1, sizeof *c->r)) == NULL) rc = nomem(err);
        if (rc == MCDC_OK) {
            c->r->key = s->runs[i];
            rc = mcdc_storage_size(s->cfg.spill, s->runs[i], &c->r->size, err);
        }
        if (rc == MCDC_OK) rc = cur_load(s, c, err);
        if (rc == MCDC_OK) cur_fill(s, c);
    }
    if (rc == MCDC_OK && s->replaying) { /* every row: nothing spilled, nothing held */
        cursor *c = &s->cur[s->n_cur++];
        c->is_run = true;
        s->replayed.have = false;
        s->replayed.hash = 0;
        s->replayed.rows = 0;
        s->replay_restart = true;
        rc = cur_load(s, c, err);
        if (rc == MCDC_OK) cur_fill(s, c);
    }
    free_retired(s);
    if (with_held) {
        s->cur[s->n_cur++] = (cursor){.is_run = false, .pos = 0};
        cur_fill(s, &s->cur[s->n_cur - 1]);
    }
    for (int32_t i = 0; i < s->n_cur; i++)
        if (s->cur[i].live) s->heap[s->n_heap++] = i;
    for (int32_t i = s->n_heap / 2 - 1; i >= 0; i--) heap_down(s, i);
    if (rc) mcdc_error_wrap(err, "reading back sorted rows from %s", s->cfg.spill_prefix);
    return rc;
}

int silver_sorter_rewind(silver_sorter *s, bool keys_only, mcdc_error *err) {
    MCDC_ASSERT(s->finished && !s->merging);
    return open_cursors(s, keys_only, 0, true, err);
}

static int history_run_tie(silver_sorter *s, const uint8_t *k, uint32_t klen, uint32_t len,
                           const mcdc_batch *src, int64_t row, mcdc_error *err) {
    const cursor *t = s->n_heap > 0 ? &s->cur[s->heap[0]] : NULL;
    bool same = t && t->klen == klen && memcmp(t->k, k, klen) == 0;
    silver_rank r;
    if (s->tie_pending && !same) {
        s->tie_pending = false;
        sort_rank(s, k, klen, &r);
        return not_unique(s, TIE_SNAPSHOT, &r, src, row, err);
    }
    s->tie_pending = false;
    if (same && t->len == len && memcmp(t->k + klen, k + klen, len - klen) == 0) {
        sort_rank(s, k, klen, &r);
        s->tie_pending = snapshot_rank(&r);
    }
    return MCDC_OK;
}

static int chunk_room(silver_sorter *s, mcdc_error *err) {
    silver_chunk *ch = &s->chunk;
    if (ch->key == NULL) {
        ch->key = mcdc_calloc(SILVER_BATCH_ROWS, sizeof *ch->key);
        ch->key_len = mcdc_calloc(SILVER_BATCH_ROWS, sizeof *ch->key_len);
        ch->rank = mcdc_calloc(SILVER_BATCH_ROWS, sizeof *ch->rank);
        ch->tags = mcdc_calloc(SILVER_BATCH_ROWS, sizeof *ch->tags);
        s->koff = mcdc_calloc(SILVER_BATCH_ROWS, sizeof *s->koff);
        s->pend = mcdc_calloc(SILVER_BATCH_ROWS, sizeof *s->pend);
        if (!ch->key || !ch->key_len || !ch->rank || !ch->tags || !s->koff || !s->pend)
            return nomem(err);
    }
    mcdc_batch_free(ch->rows);
    ch->rows = NULL;
    ch->n = 0;
    mcdc_buf_reset(&ch->bytes);
    return MCDC_OK;
}

/* Rows sel[i] (NULL: i) for i in [0, n) of the chunk from their sources,
 * a gather per column: column col_of[j] (NULL: j) into dst's column j, for
 * j in [0, n_cols). */
static int gather_chunk(silver_sorter *s, mcdc_batch *dst, const int32_t *col_of, int32_t n_cols,
                        const int32_t *sel, int64_t n, mcdc_error *err) {
    /* Each row's source as an index into seen: a held batch's through
     * slot (held rows come from any of them, in no order), a run's by a
     * search (at most one batch per run and the retired ones, and rows of
     * a run come in stretches from one batch). */
    int32_t *which = mcdc_malloc((size_t)(n ? n : 1) * sizeof *which);
    int32_t *slot = mcdc_malloc((size_t)(s->n_acc ? s->n_acc : 1) * sizeof *slot);
    const mcdc_batch **seen = NULL;
    const mcdc_column **cols = NULL;
    int32_t n_seen = 0, cap_seen = 0;
    const mcdc_batch *prev = NULL;
    int rc = which && slot ? MCDC_OK : nomem(err);
    for (int32_t j = 0; rc == MCDC_OK && j < s->n_acc; j++) slot[j] = -1;
    for (int64_t i = 0; rc == MCDC_OK && i < n; i++) {
        const pref *p = &s->pend[sel ? sel[i] : i];
        const mcdc_batch *b = p->src;
        MCDC_ASSERT(p->acc < s->n_acc && (p->acc < 0 || s->acc[p->acc] == b));
        int32_t k = p->acc >= 0 ? slot[p->acc] : i > 0 && prev == b ? which[i - 1] : -1;
        prev = b;
        for (int32_t j = n_seen - 1; k < 0 && p->acc < 0 && j >= 0; j--)
            if (seen[j] == b) k = j;
        if (k < 0) {
            if (n_seen == cap_seen) {
                int32_t cap = cap_seen ? cap_seen * 2 : 16;
                const mcdc_batch **v = mcdc_realloc(seen, (size_t)cap * sizeof *v);
                if (v == NULL) {
                    rc = nomem(err);
                    break;
                }
                seen = v;
                cap_seen = cap;
            }
            seen[n_seen] = b;
            k = n_seen++;
            if (p->acc >= 0) slot[p->acc] = k;
        }
        which[i] = k;
        s->idx[i] = p->row;
    }
    if (rc == MCDC_OK && (cols = mcdc_malloc((size_t)(n_seen ? n_seen : 1) * sizeof *cols)) == NULL)
        rc = nomem(err);
    for (int32_t c = 0; rc == MCDC_OK && c < n_cols; c++) {
        int32_t from = col_of ? col_of[c] : c;
        MCDC_ASSERT(from >= 0 && from < s->n_cols);
        for (int32_t j = 0; j < n_seen; j++) cols[j] = &seen[j]->columns[from];
        rc = mcdc_col_gather(&dst->columns[c], cols, which, s->idx, n, err);
    }
    mcdc_free(which);
    mcdc_free(slot);
    mcdc_free(seen);
    mcdc_free(cols);
    return rc;
}

/* The chunk's rows, every column. */
static int build_rows(silver_sorter *s, mcdc_error *err) {
    silver_chunk *ch = &s->chunk;
    int rc = mcdc_batch_create(&ch->rows, s->schema, ch->n ? ch->n : 1, err);
    if (rc == MCDC_OK) rc = gather_chunk(s, ch->rows, NULL, s->n_cols, NULL, ch->n, err);
    if (rc == MCDC_OK) rc = mcdc_batch_seal(ch->rows, err);
    return rc;
}

void silver_sorter_defer_rows(silver_sorter *s, bool defer) { s->defer_rows = defer; }

int silver_sorter_take(silver_sorter *s, mcdc_batch *dst, const int32_t *col_of,
                       const int32_t *sel, int32_t n, mcdc_error *err) {
    MCDC_ASSERT(s->defer_rows && !s->keys_only);
    MCDC_ASSERT(dst->schema->n_fields > 0 && n >= 0);
    for (int32_t i = 0; i < n; i++) MCDC_ASSERT(sel[i] >= 0 && sel[i] < s->chunk.n);
    return gather_chunk(s, dst, col_of, dst->schema->n_fields, sel, n, err);
}

/* The replay's current batch, read from its first row, as the next chunk
 * when every key of it is kept: the batch itself is the chunk's rows, not
 * a copy (the rows come in order, a key once: nothing to merge or cut). */
static bool replay_whole(const silver_sorter *s, const cursor *c) {
    if (s->n_heap != 1 || s->keys_only || s->defer_rows || s->cfg.history || !c->is_run ||
        c->r != NULL || c->at != 0 || c->b->rows > SILVER_BATCH_ROWS)
        return false;
    const mcdc_column *tg = &c->kb->columns[2];
    for (int64_t i = 0; s->cfg.ranked && s->cfg.keep_tags && i < c->b->rows; i++)
        if (!((uint32_t)cell_i32(tg, i) & s->cfg.keep_tags)) return false;
    return true;
}

static int replay_chunk(silver_sorter *s, cursor *c, const silver_chunk **out, mcdc_error *err) {
    silver_chunk *ch = &s->chunk;
    const mcdc_column *sk = &c->kb->columns[0];
    int64_t n = c->b->rows;
    /* the keys are the sort keys' first bytes where they are: the batch of
     * them is retired below, freed by the next call as the chunk is */
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *k = sk->data + sk->offsets[i];
        uint32_t klen = (uint32_t)cell_i32(&c->kb->columns[1], i);
        ch->key[i] = k;
        ch->key_len[i] = klen;
        ch->tags[i] = (uint32_t)cell_i32(&c->kb->columns[2], i);
        if (s->cfg.ranked)
            for (int j = 0; j < SILVER_RANK_BYTES; j++) ch->rank[i].b[j] = (uint8_t)~k[klen + (uint32_t)j];
    }
    ch->n = n;
    ch->rows = c->b; /* the chunk's now: freed by the next call */
    c->b = NULL;
    int rc = cur_load(s, c, err); /* retires c->kb */
    if (rc) return rc;
    cur_fill(s, c);
    if (!c->live) s->n_heap = 0;
    *out = ch;
    return MCDC_OK;
}

int silver_sorter_next(silver_sorter *s, const silver_chunk **out, mcdc_error *err) {
    *out = NULL;
    free_retired(s);
    silver_chunk *ch = &s->chunk;
    int rc = chunk_room(s, err);
    if (rc == MCDC_OK && s->replaying && s->n_heap == 1 && replay_whole(s, &s->cur[s->heap[0]]))
        return replay_chunk(s, &s->cur[s->heap[0]], out, err);
    /* rows of runs are checked against each other here (held rows were
     * when they were sorted); a keys-only read has no rows to name */
    bool check = s->cfg.unique_keys && !s->keys_only;
    while (rc == MCDC_OK && s->n_heap > 0 && ch->n < SILVER_BATCH_ROWS &&
           s->n_retired <= RETIRED_MAX) {
        cursor *c = &s->cur[s->heap[0]];
        const uint8_t *k = c->k;
        uint32_t klen = c->klen, len = c->len, tags = c->tags;
        int32_t acc = c->is_run ? -1 : (int32_t)s->ents[c->pos].batch;
        const mcdc_batch *src = c->is_run ? c->b : s->acc[acc];
        int64_t row = c->is_run ? c->at : s->ents[c->pos].row;
        /* k points into src (a run's batch, retired rather than freed while
         * this chunk is built) or the arena: valid through the steps below */
        rc = heap_pop_step(s, err);
        uint32_t all = tags;
        bool top = true; /* the next row of the key is the winner's runner-up */
        while (rc == MCDC_OK && s->cfg.ranked && !s->cfg.history && s->n_heap > 0) {
            const cursor *t = &s->cur[s->heap[0]];
            if (t->klen != klen || memcmp(t->k, k, klen) != 0) break;
            if (check && top && t->len == len && memcmp(t->k + klen, k + klen, len - klen) == 0)
                rc = run_tie(s, k, klen, src, row, err);
            top = false;
            all |= t->tags;
            if (rc == MCDC_OK) rc = heap_pop_step(s, err);
        }
        if (rc == MCDC_OK && check && s->cfg.history && s->n_cur > 1)
            rc = history_run_tie(s, k, klen, len, src, row, err);
        if (rc) break;
        /* (runs merged keep every key: a later row of it may have the tags) */
        if (s->cfg.ranked && s->cfg.keep_tags && !s->merging && !(all & s->cfg.keep_tags)) continue;
        int64_t i = ch->n++;
        s->pend[i] = (pref){src, (int32_t)row, acc};
        s->koff[i] = ch->bytes.len;
        ch->key_len[i] = klen;
        ch->tags[i] = all;
        if (s->cfg.ranked)
            for (int j = 0; j < SILVER_RANK_BYTES; j++)
                ch->rank[i].b[j] = s->cfg.history ? k[klen + (uint32_t)j] : (uint8_t)~k[klen + (uint32_t)j];
        rc = mcdc_buf_append(&ch->bytes, k, klen, err);
    }
    if (rc == MCDC_OK && !s->keys_only && !s->defer_rows && ch->n > 0) rc = build_rows(s, err);
    if (rc) return rc;
    for (int64_t i = 0; i < ch->n; i++) ch->key[i] = (const uint8_t *)ch->bytes.data + s->koff[i];
    if (ch->n > 0) *out = ch;
    return MCDC_OK;
}

/* ---- merging runs ---------------------------------------------------------------- */

/* The sort keys of a chunk as a run stores them: __skey (the key, then on
 * a ranked sorter its rank as sorted: inverted unless a history's), __klen,
 * __tags. */
static int chunk_keys(const silver_sorter *s, const silver_chunk *ch, mcdc_batch **out,
                      mcdc_error *err) {
    uint32_t rank = s->cfg.ranked ? SILVER_RANK_BYTES : 0;
    int64_t bytes = 0;
    for (int64_t i = 0; i < ch->n; i++) bytes += ch->key_len[i] + rank;
    int rc = mcdc_batch_create(out, s->key_schema, ch->n, err);
    mcdc_column *sk = rc == MCDC_OK ? &(*out)->columns[0] : NULL;
    if (rc == MCDC_OK) rc = keys_reserve(sk, ch->n, bytes, err);
    for (int64_t i = 0; rc == MCDC_OK && i < ch->n; i++) {
        uint8_t *d = sk->data + sk->data_len;
        memcpy(d, ch->key[i], ch->key_len[i]);
        for (uint32_t j = 0; j < rank; j++)
            d[ch->key_len[i] + j] = s->cfg.history ? ch->rank[i].b[j] : (uint8_t)~ch->rank[i].b[j];
        keys_end_row(sk, i, ch->key_len[i] + rank, ch->key_len[i], ch->tags[i]);
    }
    if (rc == MCDC_OK) {
        sk->length = sk[1].length = sk[2].length = ch->n;
        rc = mcdc_batch_seal(*out, err);
    }
    return rc;
}

/* Merges runs[from..] into one (tier_runs), read as the rows are at the
 * end (a ranked sorter's first row of each key with all its tags, but no
 * key left out: a later row of it may carry the tags kept), so that rows can
 * keep coming. The merged run takes their place once it is written (ties
 * keep their order: the runs before and after it are older and newer);
 * until then they stay. */
static int merge_runs(silver_sorter *s, int32_t from, mcdc_error *err) {
    MCDC_ASSERT(from >= 0 && s->n_runs - from >= 2);
    char *key = run_key(s);
    if (key == NULL) return nomem(err);
    mcdc_storage_writer *w = NULL;
    int rc = mcdc_storage_writer_open(&w, s->cfg.spill, key, err);
    s->merging = true;
    if (rc == MCDC_OK) rc = open_cursors(s, false, from, false, err);
    const silver_chunk *ch = NULL;
    while (rc == MCDC_OK && (rc = silver_sorter_next(s, &ch, err)) == MCDC_OK && ch) {
        mcdc_batch *kb = NULL;
        rc = chunk_keys(s, ch, &kb, err);
        if (rc == MCDC_OK) rc = write_pairs(s, w, kb, 0, ch->rows, err);
        mcdc_batch_free(kb);
    }
    s->merging = false;
    close_cursors(s);
    if (rc == MCDC_OK) rc = chunk_room(s, err); /* the last chunk's rows go */
    if (rc == MCDC_OK) rc = mcdc_storage_writer_commit(w, MCDC_STORAGE_PUT_SCRATCH, err);
    else mcdc_storage_writer_abort(w);
    if (rc) {
        mcdc_free(key);
        return mcdc_error_wrap(err, "merging %d spilled runs into one in %s",
                               (int)(s->n_runs - from), s->cfg.spill_prefix), rc;
    }
    int32_t level = 0;
    for (int32_t i = from; i < s->n_runs; i++) {
        if (s->level[i] >= level) level = s->level[i] + 1;
        mcdc_storage_delete(s->cfg.spill, s->runs[i], NULL);
        mcdc_free(s->runs[i]);
    }
    s->runs[from] = key;
    s->level[from] = level;
    s->n_runs = from + 1;
    s->merges++;
    return MCDC_OK;
}

void silver_sorter_free(silver_sorter *s) {
    if (s == NULL) return;
    close_cursors(s);
    free_held(s);
    mcdc_free(s->ents);
    mcdc_free(s->acc);
    for (int32_t i = 0; i < s->n_runs; i++) {
        mcdc_storage_delete(s->cfg.spill, s->runs[i], NULL);
        mcdc_free(s->runs[i]);
    }
    mcdc_free(s->runs);
    mcdc_free(s->heap);
    mcdc_free(s->idx);
    mcdc_free((void *)s->cfg.key_cols);
    mcdc_free((void *)s->cfg.spill_prefix);
    mcdc_batch_free(s->chunk.rows);
    mcdc_free(s->retired);
    mcdc_free(s->pend);
    mcdc_free(s->koff);
    mcdc_free((void *)s->chunk.key);
    mcdc_free(s->chunk.key_len);
    mcdc_free(s->chunk.rank);
    mcdc_free(s->chunk.tags);
    mcdc_buf_free(&s->chunk.bytes);
    mcdc_schema_unref(s->run_schema);
    mcdc_schema_unref(s->key_schema);
    mcdc_buf_free(&s->io);
    mcdc_schema_unref(s->schema);
    mcdc_schema_unref(s->cfg.schema);
    mcdc_free(s->held_of);
    mcdc_free(s->added.last);
    mcdc_free(s->replayed.last);
    mcdc_buf_free(&s->rkeys);
    mcdc_free(s->rkoff);
    mcdc_free(s);
}
