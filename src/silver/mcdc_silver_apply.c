/*
 * mcdc_silver_apply.c - mssql-cdc apply (the reference's apply_changes,
 * §2.7): the job that keeps silver from bronze.
 *
 * One pass is one unit of the job frame (mcdc_frame.h), on a ledger of its
 * own: the lake. A pass's merge commit to silver carries txn(mssql-cdc.apply,
 * n) and the positions it planned (the control row's silver cells before
 * and after, bronze's version, the verdict); the unit commits when the
 * control row holds the "after" cells. So:
 *   plan     read the control table (bronze's verdict, silver's row), the
 *            facts and plans (snapshots, chunks), then pin bronze at one
 *            version and rank what it holds beyond silver's position
 *   run      merge (mcdc_silver_merge.c) and commit once      during_merge,
 *                                                               after_bronze
 *   commit   the control row: applied_lsn, snapshot_lsn, open_snapshot_lsn,
 *            snapshot_wave                                     after_commit
 *   verdict  finalized_until to bronze's verdict read before bronze, unless
 *            a chunked snapshot is open or there is no facts table
 * A run killed after the merge commit finds silver's txn at n while the
 * control row still holds n's "before" cells: it replays unit n, whose data
 * is there (the frame verifies it is this ledger's and this plan's), and
 * writes only the control row (crash point 8 of §2.13). Killed before the
 * commit, nothing of the pass is visible and the next run plans again.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "mcdc_cfg.h"
#include "mcdc_changes.h"
#include "mcdc_finalization.h"
#include "mcdc_frame.h"
#include "mcdc_ledger.h"
#include "mcdc_options.h"
#include "mcdc_plans.h"
#include "mcdc_silver.h"
#include "mcdc_snapfacts.h"
#include "mcdc_tables.h"

/* Silver's txn app id, and the ledger id stamped on its commits: one job
 * per silver table, whatever runs it. */
#define APPLY_APP_ID "mssql-cdc.apply"
#define APPLY_LEDGER_ID "mssql-cdc apply"
#define SPILL_DIR "_mssql_cdc_spill/"
/* A merge that loses to another writer's commit is done again on the new
 * version this many times. */
#define APPLY_CONFLICT_RETRIES 10

/* Bronze's own columns: none goes to silver but _start_lsn and _commit_ts. */
static const char *const BRONZE_META[] = {"_capture_instance", "_start_lsn", "_seqval", "_operation",
                                          "_command_id", "_commit_ts", "_batch_id", "_snapshot",
                                          "_chunk", NULL};

static bool is_meta(const char *name) {
    for (int i = 0; BRONZE_META[i]; i++)
        if (strcmp(BRONZE_META[i], name) == 0) return true;
    return false;
}

typedef struct {
    bool set;
    char v[23];
} lsnopt;

static void lsn_set(lsnopt *o, const char *p, size_t n) {
    o->set = n == 22;
    if (o->set) {
        memcpy(o->v, p, 22);
        o->v[22] = 0;
    }
}
/* The LSN right after o (o + 1, "0x" + 20 hex digits): an exclusive lower
 * bound as the scans' inclusive one. Unchanged at the largest LSN. */
static lsnopt lsn_next(const lsnopt *o) {
    lsnopt n = *o;
    if (!n.set) return n;
    static const char digits[] = "0123456789ABCDEF";
    for (int i = 21; i >= 2; i--) {
        char c = n.v[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                             : c >= 'a' && c <= 'f' ? c - 'a' + 10 : 0;
        if (v < 15) {
            n.v[i] = digits[v + 1];
            return n;
        }
        n.v[i] = '0';
    }
    return *o; /* all F: nothing above it */
}

static int lsn_cmp(const lsnopt *a, const lsnopt *b) { /* unset lowest */
    if (!a->set || !b->set) return (int)a->set - (int)b->set;
    return memcmp(a->v, b->v, 22);
}
static void lsn_max(lsnopt *into, const lsnopt *x) {
    if (lsn_cmp(x, into) > 0) *into = *x;
}

/* Silver's cells of its control row. */
typedef struct {
    lsnopt applied, snapshot, open;
    bool has_wave;
    int64_t wave;
} apply_state;

static bool state_eq(const apply_state *a, const apply_state *b) {
    return lsn_cmp(&a->applied, &b->applied) == 0 && lsn_cmp(&a->snapshot, &b->snapshot) == 0 &&
           lsn_cmp(&a->open, &b->open) == 0 && a->has_wave == b->has_wave &&
           (!a->has_wave || a->wave == b->wave);
}

static json_t *lsn_json(const lsnopt *o) { return o->set ? json_string(o->v) : json_null(); }

static json_t *state_json(const apply_state *s) {
    return json_pack("{s:o, s:o, s:o, s:o}", "applied_lsn", lsn_json(&s->applied), "snapshot_lsn",
                     lsn_json(&s->snapshot), "open_snapshot_lsn", lsn_json(&s->open),
                     "snapshot_wave", s->has_wave ? json_integer(s->wave) : json_null());
}

static void state_of_json(apply_state *s, const json_t *j) {
    memset(s, 0, sizeof *s);
    const char *names[3] = {"applied_lsn", "snapshot_lsn", "open_snapshot_lsn"};
    lsnopt *dst[3] = {&s->applied, &s->snapshot, &s->open};
    for (int i = 0; i < 3; i++) {
        const char *t = json_string_value(json_object_get(j, names[i]));
        if (t) lsn_set(dst[i], t, strlen(t));
    }
    json_t *w = json_object_get(j, "snapshot_wave");
    s->has_wave = json_is_integer(w);
    s->wave = s->has_wave ? (int64_t)json_integer_value(w) : 0;
}

/* A chunk an announced 'snapshot_chunk' row of the open snapshot names. */
typedef struct {
    int64_t chunk, wave;
    char stamp[23];
    bool has_ts;     /* the commit time the stamp maps to (the facts row's min_commit_ts) */
    int64_t ts_us;
    json_t *lo, *hi; /* owned; NULL: open */
} achunk;

/* What plan found, for run. */
typedef struct {
    int64_t bronze_version;
    apply_state start, end;
    bool rebuild, merged, is_open;
    bool has_verdict; /* bronze's, to pass on after the pass */
    char verdict_lsn[32];
    int64_t verdict_us;
    silver_sorter *changes;
    mcdc_schema *change_schema; /* captured columns, _start_lsn, _commit_ts, then the rank's */
    int32_t n_cap;
    silver_range *ranges;
    int32_t n_ranges;
    int64_t facts_version; /* the facts read (-1: none): repairs after it are new next pass */
    mcdc_batch *close;          /* SCD2 rebuild: the snapshot's LSN and commit time (one row) */
    mcdc_batch *stamps;         /* SCD2 waves: each new chunk's stamp and its commit time */
} apply_plan;

struct mcdc_apply {
    mcdc_apply_cfg cfg;
    char **strings; /* owned copies of cfg's strings */
    int n_strings;
    char **keys;    /* owned */
    int32_t n_keys;
    char **track;   /* owned: track_history_columns */
    int32_t n_track;
    const mcdc_opts *opts;
    mcdc_ctx ctx;
    mcdc_log_sink sink;
    /* one run */
    mcdc_table *bronze, *silver, *control, *facts, *plans;
    char *plans_name;
    mcdc_changes *changes;          /* with a connection string */
    char **ours, **others;          /* capture instance names seen, lower-cased */
    int32_t n_ours, n_others;
    bool has_fin;                   /* silver's verdict, as last read */
    int64_t fin_us;
    apply_plan plan;
    bool planned;
    int64_t mem_unit;               /* the unit this run planned (the ledger's memory) */
    json_t *mem_start, *mem_end;
    apply_state commit_end;         /* what write_commit writes */
    mcdc_apply_result res;
    mcdc_apply_fn fn;
    void *fn_ctx;
    bool warned_no_facts, warned_no_bronze;
    int64_t fresh_passes;           /* passes this run planned (not replays) */
};

static int nomem(mcdc_error *err) { return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory"); }

/* ---- capture instances ------------------------------------------------------------ */

static bool in_list(char **v, int32_t n, const char *p, size_t len) {
    for (int32_t i = 0; i < n; i++)
        if (strlen(v[i]) == len && mcdc_str_nieq(v[i], p, len)) return true;
    return false;
}

static int list_add(char ***v, int32_t *n, const char *p, size_t len, mcdc_error *err) {
    char **x = mcdc_realloc(*v, (size_t)(*n + 1) * sizeof *x);
    if (x == NULL) return nomem(err);
    *v = x;
    if ((x[*n] = mcdc_strndup(p, len)) == NULL) return nomem(err);
    (*n)++;
    return MCDC_OK;
}

/* Is a bronze row's capture instance ours: the one given, or (with the
 * source options) another capture instance of its table, ignoring case? */
static int instance_ours(mcdc_apply *a, const char *p, size_t len, bool *ours, mcdc_error *err) {
    *ours = true;
    if (in_list(a->ours, a->n_ours, p, len)) return MCDC_OK;
    *ours = false;
    if (in_list(a->others, a->n_others, p, len)) return MCDC_OK;
    bool yes = false;
    int rc = MCDC_OK;
    if (a->changes) {
        char *name = mcdc_strndup(p, len);
        if (name == NULL) return nomem(err);
        rc = mcdc_changes_is_table_instance(a->changes, name, false, &yes, err);
        mcdc_free(name);
    }
    if (rc) return rc;
    *ours = yes;
    return yes ? list_add(&a->ours, &a->n_ours, p, len, err) : list_add(&a->others, &a->n_others, p, len, err);
}

static int other_instance(mcdc_apply *a, const char *p, size_t len, mcdc_error *err) {
    return mcdc_error_set(err, MCDC_E_INVALID,
                          "%s holds rows of capture instance '%.*s', which is not '%s' or another "
                          "capture instance of its table%s: nothing was applied",
                          a->cfg.bronze, (int)(len > 128 ? 128 : len), p, a->cfg.capture_instance,
                          a->changes ? "" : " (pass the stream's source options to read the "
                                            "table's capture instances from SQL Server)");
}

/* ---- reading cells ------------------------------------------------------------------ */

static bool text_at(const mcdc_column *c, int64_t r, const char **p, size_t *n) {
    if (c == NULL || !mcdc_col_is_valid(c, r)) return false;
    *p = (const char *)c->data + c->offsets[r];
    *n = (size_t)(c->offsets[r + 1] - c->offsets[r]);
    return true;
}

static bool i32_at(const mcdc_column *c, int64_t r, int32_t *v) {
    if (c == NULL || !mcdc_col_is_valid(c, r)) return false;
    memcpy(v, c->values + r * 4, 4);
    return true;
}

/* LSN text (22 bytes) compared with a set lsnopt: <0, 0, >0. */
static int lsn_vs(const char *p, size_t n, const lsnopt *o) {
    if (n != 22) return n < 22 ? -1 : 1;
    return memcmp(p, o->v, 22);
}

/* ---- file statistics ----------------------------------------------------------------- */

/* minValues / maxValues / nullCount of column in a file's statistics. */
static json_t *stat_of(json_t *stats, const char *group, const mcdc_table_view *v,
                       const char *column) {
    const char *name = mcdc_table_view_stats_name(v, column);
    return name ? json_object_get(json_object_get(stats, group), name) : NULL;
}

typedef struct pass1 pass1;
typedef struct {
    bool skip_chunk_files;
    pass1 *p1;
} snap_filter;

static void snapshot_seen(pass1 *p, const char *s, size_t n);

/* A statistic that is exact: a string shorter than Delta's 32-character
 * prefix, or an integer. */
static const char *exact_text(json_t *j) {
    const char *s = json_string_value(j);
    return s && strlen(s) < 32 ? s : NULL;
}

static int instance_ours(mcdc_apply *a, const char *p, size_t len, bool *ours, mcdc_error *err);

/* The first bronze pass reads snapshot rows only: a file whose smallest
 * operation is above 0 holds none, and (once the facts say which chunks
 * arrived) one of chunk rows alone is not a whole snapshot's. A file of one
 * whole snapshot's rows alone (operation 0 only, no chunk, one capture
 * instance of ours, one snapshot LSN) is known by its statistics: it is
 * not read. */
static bool snapshot_files(void *ctx, const mcdc_table_view *v, const mcdc_table_file *f);

/* ---- the first bronze pass: the newest whole snapshot --------------------------------- */

struct pass1 {
    mcdc_apply *a;
    lsnopt after;     /* rows at or below it are of snapshots already rebuilt from */
    lsnopt whole;     /* max coalesce(_snapshot, _start_lsn) of whole snapshots' rows */
    bool chunk_rows;  /* rows of a chunked snapshot after `after` */
    int32_t c_ci, c_op, c_lsn, c_snap, c_chunk;
    int rc;           /* an error deciding on statistics */
    mcdc_error *err;
};

static void snapshot_seen(pass1 *p, const char *s, size_t n) {
    lsnopt x;
    lsn_set(&x, s, n);
    lsn_max(&p->whole, &x);
}

static bool snapshot_files(void *ctx, const mcdc_table_view *v, const mcdc_table_file *f) {
    snap_filter *sf = ctx;
    pass1 *p = sf->p1;
    if (f->stats_json == NULL || p->rc) return true;
    json_error_t je;
    json_t *j = json_loads(f->stats_json, 0, &je);
    bool read = true;
    json_t *op = stat_of(j, "minValues", v, "_operation");
    json_t *op_max = stat_of(j, "maxValues", v, "_operation");
    if (json_is_integer(op) && json_integer_value(op) > 0) read = false;
    json_t *nulls = stat_of(j, "nullCount", v, "_chunk");
    json_t *rows = json_object_get(j, "numRecords");
    bool no_chunks = json_is_integer(nulls) && json_is_integer(rows) &&
                     json_integer_value(nulls) == json_integer_value(rows);
    if (read && sf->skip_chunk_files && json_is_integer(nulls) && json_integer_value(nulls) == 0 &&
        json_is_integer(rows) && json_integer_value(rows) > 0)
        read = false;
    /* one whole snapshot's rows: the statistics tell its LSN */
    const char *ci_lo = exact_text(stat_of(j, "minValues", v, "_capture_instance"));
    const char *ci_hi = exact_text(stat_of(j, "maxValues", v, "_capture_instance"));
    const char *sn_lo = exact_text(stat_of(j, "minValues", v, "_snapshot"));
    const char *sn_hi = exact_text(stat_of(j, "maxValues", v, "_snapshot"));
    json_t *sn_nulls = stat_of(j, "nullCount", v, "_snapshot");
    const char *ls_lo = exact_text(stat_of(j, "minValues", v, "_start_lsn"));
    if (read && json_is_integer(op) && json_integer_value(op) == 0 && json_is_integer(op_max) &&
        json_integer_value(op_max) == 0 && no_chunks && ci_lo && ci_hi && strcmp(ci_lo, ci_hi) == 0 &&
        sn_lo && sn_hi && strcmp(sn_lo, sn_hi) == 0 && json_is_integer(sn_nulls) &&
        json_integer_value(sn_nulls) == 0 && ls_lo && strlen(sn_lo) == 22 &&
        (!p->after.set || lsn_vs(ls_lo, strlen(ls_lo), &p->after) > 0)) {
        bool ours = false;
        p->rc = instance_ours(p->a, ci_lo, strlen(ci_lo), &ours, p->err);
        if (p->rc == MCDC_OK && ours) {
            snapshot_seen(p, sn_lo, 22);
            read = false;
        }
    }
    json_decref(j);
    return read;
}

static int pass1_rows(void *ctx, mcdc_batch *b, mcdc_error *err) {
    pass1 *p = ctx;
    int rc = MCDC_OK;
    const mcdc_column *ci = &b->columns[p->c_ci], *op = &b->columns[p->c_op],
                      *lsn = &b->columns[p->c_lsn];
    const mcdc_column *snap = p->c_snap >= 0 ? &b->columns[p->c_snap] : NULL;
    const mcdc_column *chunk = p->c_chunk >= 0 ? &b->columns[p->c_chunk] : NULL;
    for (int64_t r = 0; r < b->rows && rc == MCDC_OK; r++) {
        int32_t o;
        const char *l, *c, *s;
        size_t ln, cn, sn;
        if (!i32_at(op, r, &o) || o != 0 || !text_at(lsn, r, &l, &ln)) continue;
        if (p->after.set && lsn_vs(l, ln, &p->after) <= 0) continue;
        bool ours = false;
        if (text_at(ci, r, &c, &cn)) rc = instance_ours(p->a, c, cn, &ours, err);
        if (rc || !ours) continue;
        if (chunk && mcdc_col_is_valid(chunk, r)) {
            p->chunk_rows = true;
            continue;
        }
        if (!text_at(snap, r, &s, &sn)) s = l, sn = ln;
        snapshot_seen(p, s, sn);
    }
    mcdc_batch_free(b);
    return rc;
}

/* ---- the second pass: the rows to apply, into the sorter ------------------------------ */

typedef struct {
    mcdc_apply *a;
    apply_plan *pl;
    /* the selection */
    bool rebuild;
    lsnopt snapshot, applied, s_open, first;
    const int64_t *new_chunks;  /* sorted */
    int32_t n_new;
    lsnopt top;                 /* newest change applied */
    /* repairs recorded since the last pass (not on a rebuild): their rows
     * are applied whatever their stamp, ranked with every later change */
    const char (*rep_stamps)[23];
    int32_t n_rep;
    lsnopt rep_min;
    int64_t repair_rows;
    uint8_t *is_rep;            /* per row picked: a repair row (its rank columns rewritten) */
    bool history;               /* SCD2: a rebuild's snapshot rows count at its LSN */
    bool keep_stamps;           /* ... but a new chunk's row in its range at its stamp */
    lsnopt changes_after;       /* a rebuild's changes: after the snapshot (a history: after
                                 * the position, when that is older, to keep their versions) */
    /* a history's rebuild: commit times that tell the snapshot's (its rows
     * carry none): a snapshot row's, the newest change's at or before it,
     * the oldest change's after it */
    bool has_ts_snap, has_ts_le, has_ts_gt;
    int64_t ts_snap, ts_le, ts_gt;
    /* columns of the scan */
    int32_t n_cap, c_lsn, c_ts, c_op, c_seq, c_ci, c_cmd, c_snap, c_chunk;
    int32_t *idx;               /* rows picked of the batch, and their tags */
    uint32_t *tags;
    int64_t cap;
    int32_t *from;              /* the change rows' columns in a scanned batch */
    int32_t key_cols[SILVER_KEYS_MAX]; /* the key's columns in a scanned batch */
    int32_t n_keys;
    mcdc_buf k1, k2;
} pass2;

static bool is_new_chunk(const pass2 *p, int64_t c) {
    int32_t lo = 0, hi = p->n_new;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (p->new_chunks[mid] == c) return true;
        if (p->new_chunks[mid] < c) lo = mid + 1;
        else hi = mid;
    }
    return false;
}

/* Does a chunk range of the pass hold row r's key? */
static bool in_range(const pass2 *p, const mcdc_batch *b, int64_t r) {
    int64_t v;
    return p->pl->n_ranges > 0 && silver_range_value(&b->columns[p->key_cols[0]], r, &v) &&
           silver_range_find(p->pl->ranges, p->pl->n_ranges, v) != NULL;
}

/* SCD2: stamps as rows of _start_lsn (an LSN, 22 characters) and
 * _commit_ts (us; NULL when !has[i]): the rebuild's (one row, the
 * snapshot's LSN), a wave pass's (one per chunk stamp, sorted). */
static int stamp_rows(mcdc_batch **out, const apply_plan *pl, int32_t n, const char (*lsn)[23],
                      const bool *has, const int64_t *us, mcdc_error *err) {
    mcdc_schema *cs = NULL;
    const mcdc_field *lf = &pl->change_schema->fields[pl->n_cap], *tf = &pl->change_schema->fields[pl->n_cap + 1];
    int rc = mcdc_schema_create(&cs, 2, err);
    if (rc == MCDC_OK) rc = mcdc_schema_set(cs, 0, lf->name, lf->type, 0, 0, 0, true, err);
    if (rc == MCDC_OK) rc = mcdc_schema_set(cs, 1, tf->name, tf->type, 0, 0, 0, true, err);
    if (rc == MCDC_OK) rc = mcdc_batch_create(out, cs, n, err);
    mcdc_schema_unref(cs);
    for (int32_t i = 0; rc == MCDC_OK && i < n; i++) {
        rc = mcdc_col_append_bytes(&(*out)->columns[0], lsn[i], 22, err);
        if (rc == MCDC_OK)
            rc = has[i] ? mcdc_col_append_int(&(*out)->columns[1], us[i], err)
                        : mcdc_col_append_null(&(*out)->columns[1], err);
    }
    if (rc == MCDC_OK) rc = mcdc_batch_seal(*out, err);
    if (rc) {
        mcdc_batch_free(*out);
        *out = NULL;
    }
    return rc;
}

static bool same_text(const mcdc_column *c, int64_t a, int64_t b) {
    bool va = mcdc_col_is_valid(c, a), vb = mcdc_col_is_valid(c, b);
    if (va != vb) return false;
    if (!va) return true;
    int32_t la = c->offsets[a + 1] - c->offsets[a], lb = c->offsets[b + 1] - c->offsets[b];
    return la == lb && memcmp(c->data + c->offsets[a], c->data + c->offsets[b], (size_t)la) == 0;
}

/* Row r, an update's before image (3), is followed by its after image (4:
 * the same commit, command and seqval) of the same key. That 4 outranks it
 * in every ranking of the key, with the same tags: r can be left out (an
 * update that keeps its key, nearly every one, then costs one row). The
 * reader writes a change's 3 just before its 4. */
static bool outranked_before_image(pass2 *p, const mcdc_batch *b, int64_t r) {
    int32_t o2, c1 = 0, c2 = 0;
    if (!i32_at(&b->columns[p->c_op], r + 1, &o2) || o2 != 4) return false;
    if (!same_text(&b->columns[p->c_lsn], r, r + 1) || !same_text(&b->columns[p->c_seq], r, r + 1))
        return false;
    if (p->c_cmd >= 0) {
        bool h1 = i32_at(&b->columns[p->c_cmd], r, &c1), h2 = i32_at(&b->columns[p->c_cmd], r + 1, &c2);
        if (h1 != h2 || c1 != c2) return false;
    }
    const mcdc_column *kc[SILVER_KEYS_MAX];
    for (int32_t k = 0; k < p->n_keys; k++) kc[k] = &b->columns[p->key_cols[k]];
    mcdc_buf_reset(&p->k1);
    mcdc_buf_reset(&p->k2);
    if (silver_key_append(&p->k1, kc, p->n_keys, r, NULL) != MCDC_OK ||
        silver_key_append(&p->k2, kc, p->n_keys, r + 1, NULL) != MCDC_OK)
        return false;
    return p->k1.len == p->k2.len && memcmp(p->k1.data, p->k2.data, p->k1.len) == 0;
}

static bool new_repair_stamp(const pass2 *p, const char *l, size_t ln) {
    for (int32_t i = 0; i < p->n_rep; i++)
        if (ln == 22 && memcmp(p->rep_stamps[i], l, 22) == 0) return true;
    return false;
}

/* The rank columns of the rows picked, a repair row's rewritten
 * (SILVER_REPAIR_COMMAND_ID, SILVER_REPAIR_SEQVAL): it outranks every
 * change of its LSN, and the merge knows it by them. */
static int rank_columns(const pass2 *p, const mcdc_batch *b, mcdc_column *cmd, mcdc_column *seq,
                        int64_t n, mcdc_error *err) {
    int rc = MCDC_OK;
    for (int64_t i = 0; rc == MCDC_OK && i < n; i++) {
        int64_t r = p->idx[i];
        if (p->is_rep[i]) {
            rc = mcdc_col_append_int(cmd, SILVER_REPAIR_COMMAND_ID, err);
            if (rc == MCDC_OK)
                rc = mcdc_col_append_bytes(seq, SILVER_REPAIR_SEQVAL, (int64_t)strlen(SILVER_REPAIR_SEQVAL), err);
            continue;
        }
        rc = p->c_cmd >= 0 ? mcdc_col_copy_value(cmd, &b->columns[p->c_cmd], r, err)
                           : mcdc_col_append_null(cmd, err);
        if (rc == MCDC_OK) rc = mcdc_col_copy_value(seq, &b->columns[p->c_seq], r, err);
    }
    return rc;
}

static int pass2_rows(void *ctx, mcdc_batch *b, mcdc_error *err) {
    pass2 *p = ctx;
    int rc = MCDC_OK;
    const mcdc_column *lsn = &b->columns[p->c_lsn], *op = &b->columns[p->c_op],
                      *ci = &b->columns[p->c_ci];
    const mcdc_column *snap = p->c_snap >= 0 ? &b->columns[p->c_snap] : NULL;
    const mcdc_column *chunk = p->c_chunk >= 0 ? &b->columns[p->c_chunk] : NULL;
    const mcdc_column *seqc = &b->columns[p->c_seq];
    int64_t n = 0;
    bool any_rep = false;
    if (b->rows > p->cap) {
        mcdc_free(p->idx);
        mcdc_free(p->tags);
        mcdc_free(p->is_rep);
        p->idx = mcdc_calloc((size_t)b->rows, sizeof *p->idx);
        p->tags = mcdc_calloc((size_t)b->rows, sizeof *p->tags);
        p->is_rep = mcdc_calloc((size_t)b->rows, sizeof *p->is_rep);
        p->cap = p->idx && p->tags && p->is_rep ? b->rows : 0;
        if (p->cap == 0) rc = nomem(err);
    }
    for (int64_t r = 0; r < b->rows && rc == MCDC_OK; r++) {
        int32_t o;
        const char *l, *c, *s;
        size_t ln, cn, sn;
        if (!i32_at(op, r, &o) || !text_at(lsn, r, &l, &ln)) continue;
        bool change = o != 0;
        bool base;
        if (p->rebuild && p->snapshot.set) {
            if (!text_at(snap, r, &s, &sn)) s = l, sn = ln;
            base = change ? lsn_vs(l, ln, &p->changes_after) > 0 : lsn_vs(s, sn, &p->snapshot) == 0;
        } else if (p->rebuild || !p->applied.set) {
            base = change;
        } else {
            base = change && lsn_vs(l, ln, &p->applied) > 0;
        }
        const mcdc_column *tc = &b->columns[p->c_ts];
        if (p->history && base && mcdc_col_is_valid(tc, r)) { /* the rows applied: deterministic */
            int64_t t;
            memcpy(&t, tc->values + r * 8, 8);
            int at = lsn_vs(l, ln, &p->snapshot);
            if (!change && !p->has_ts_snap) p->has_ts_snap = true, p->ts_snap = t;
            if (change && at <= 0 && (!p->has_ts_le || t > p->ts_le)) p->has_ts_le = true, p->ts_le = t;
            if (change && at > 0 && (!p->has_ts_gt || t < p->ts_gt)) p->has_ts_gt = true, p->ts_gt = t;
        }
        bool wave = false, later = false;
        if (p->n_new > 0) {
            int32_t ch;
            if (!change && text_at(snap, r, &s, &sn) && lsn_vs(s, sn, &p->s_open) == 0 &&
                i32_at(chunk, r, &ch) && is_new_chunk(p, ch) && lsn_vs(l, ln, &p->first) >= 0)
                wave = true;
            later = change && lsn_vs(l, ln, &p->s_open) > 0 && lsn_vs(l, ln, &p->first) >= 0;
        }
        /* a repair row: a change operation without a seqval */
        bool repair_row = change && o != 3 && !mcdc_col_is_valid(seqc, r);
        bool rep = false;
        if (p->n_rep > 0) {
            rep = repair_row && new_repair_stamp(p, l, ln);
            later = later || (change && lsn_vs(l, ln, &p->rep_min) > 0);
        }
        if (!base && !wave && !later && !rep) continue;
        bool ours = false;
        if (text_at(ci, r, &c, &cn)) rc = instance_ours(p->a, c, cn, &ours, err);
        if (rc) break;
        if (!ours) {
            if (base || wave || rep) rc = other_instance(p->a, c, cn, err);
            continue;
        }
        p->repair_rows += rep;
        if (base && change) {
            lsnopt x;
            lsn_set(&x, l, ln);
            lsn_max(&p->top, &x);
        }
        if (o == 3 && r + 1 < b->rows && outranked_before_image(p, b, r)) continue;
        bool at_stamp = p->keep_stamps && wave && in_range(p, b, r);
        if (p->history && !change && base && p->snapshot.set && !at_stamp) {
            /* a history ranks a rebuild's snapshot rows (a chunk's, stamped
             * later) at the snapshot's LSN, before every change after it:
             * a key's first row then tells whether the snapshot holds it.
             * A chunk applied as a wave tells it at its stamp, for the keys
             * of its range */
            if (ln == 22) memcpy(lsn->data + lsn->offsets[r], p->snapshot.v, 22);
        }
        p->idx[n] = (int32_t)r;
        p->tags[n] = (base ? SILVER_TAG_BASE : 0) | (wave ? SILVER_TAG_WAVE : 0) |
                     (later ? SILVER_TAG_LATER : 0) | (rep ? SILVER_TAG_REPAIR : 0);
        p->is_rep[n] = repair_row;
        any_rep = any_rep || repair_row;
        n++;
    }
    /* the rows picked, as change rows: captured columns, _start_lsn,
     * _commit_ts, _operation, _command_id, _seqval; all of them (the
     * common case) moved, not copied */
    int32_t k = p->n_cap;
    if (rc == MCDC_OK && n == b->rows && n > 0 && !any_rep) {
        mcdc_batch *ch = NULL;
        rc = mcdc_batch_reshape(&ch, b, p->pl->change_schema, p->from, err); /* takes b */
        b = NULL;
        if (rc == MCDC_OK) rc = silver_sorter_add_owned(p->pl->changes, ch, p->tags, err);
        return rc;
    }
    mcdc_batch *ch = NULL;
    if (rc == MCDC_OK && n > 0) rc = mcdc_batch_create(&ch, p->pl->change_schema, n, err);
    for (int32_t c = 0; rc == MCDC_OK && n > 0 && c < k + 3; c++)
        rc = mcdc_col_take(&ch->columns[c], &b->columns[c], p->idx, n, err);
    if (rc == MCDC_OK && n > 0 && any_rep) {
        rc = rank_columns(p, b, &ch->columns[k + 3], &ch->columns[k + 4], n, err);
    } else if (rc == MCDC_OK && n > 0) {
        rc = p->c_cmd >= 0 ? mcdc_col_take(&ch->columns[k + 3], &b->columns[p->c_cmd], p->idx, n, err)
                           : mcdc_col_append_nulls(&ch->columns[k + 3], n, err);
        if (rc == MCDC_OK) rc = mcdc_col_take(&ch->columns[k + 4], &b->columns[p->c_seq], p->idx, n, err);
    }
    if (rc == MCDC_OK && n > 0) rc = mcdc_batch_seal(ch, err);
    mcdc_batch_free(b);
    if (rc == MCDC_OK && n > 0) return silver_sorter_add_owned(p->pl->changes, ch, p->tags, err);
    mcdc_batch_free(ch);
    return rc;
}

/* ---- planning a pass ------------------------------------------------------------------- */

static void plan_clear(apply_plan *pl) {
    silver_sorter_free(pl->changes);
    mcdc_schema_unref(pl->change_schema);
    mcdc_free(pl->ranges);
    mcdc_batch_free(pl->close);
    mcdc_batch_free(pl->stamps);
    memset(pl, 0, sizeof *pl);
}

static void chunks_free(achunk *v, int32_t n) {
    for (int32_t i = 0; i < n; i++) {
        json_decref(v[i].lo);
        json_decref(v[i].hi);
    }
    mcdc_free(v);
}

/* A chunk bound of a single key as the int64 ranges compare (the key's
 * integer, days, microseconds): false when it cannot be one (then the
 * chunk deletes nothing by range). A datetime2(7) bound with digits below
 * the microsecond: a lower bound moves up one microsecond (the keys of that
 * microsecond lie on both sides of it), an upper one is cut. */
static bool bound_value(const json_t *j, mcdc_type_id t, bool lower, int64_t *v) {
    if (t == MCDC_TYPE_DATE32 || t == MCDC_TYPE_TIMESTAMP_NTZ) {
        const char *s = json_string_value(j);
        int64_t us;
        if (s == NULL || mcdc_parse_ts_us(s, strlen(s), &us, NULL) != MCDC_OK) return false;
        if (t == MCDC_TYPE_DATE32) {
            *v = us >= 0 ? us / 86400000000LL : -((-us + 86400000000LL - 1) / 86400000000LL);
            return true;
        }
        const char *dot = strchr(s, '.');
        bool finer = false;
        if (dot) {
            size_t d = strspn(dot + 1, "0123456789");
            for (size_t i = 6; i < d; i++) finer |= dot[1 + i] != '0';
        }
        *v = us + (lower && finer ? 1 : 0);
        return true;
    }
    if (!json_is_integer(j)) return false;
    *v = (int64_t)json_integer_value(j);
    return true;
}

static bool range_type(mcdc_type_id t) {
    return t == MCDC_TYPE_INT8 || t == MCDC_TYPE_INT16 || t == MCDC_TYPE_INT32 ||
           t == MCDC_TYPE_INT64 || t == MCDC_TYPE_DATE32 || t == MCDC_TYPE_TIMESTAMP_NTZ;
}

static int by_lo(const void *x, const void *y) {
    const silver_range *a = x, *b = y;
    if (!a->has_lo || !b->has_lo) return (int)a->has_lo - (int)b->has_lo;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* Reads control, facts and plans (in that order, before bronze). */
typedef struct {
    bool has_verdict;
    char verdict_lsn[32];
    int64_t verdict_us;
    apply_state silver;
    bool has_fin;
    int64_t fin_us;
} control_view;

static void cell_lsn(lsnopt *o, mcdc_cell c) {
    memset(o, 0, sizeof *o);
    if (c.kind == MCDC_CELL_TEXT) lsn_set(o, c.s, (size_t)c.i);
}

static int read_control(mcdc_apply *a, control_view *cv, mcdc_error *err) {
    memset(cv, 0, sizeof *cv);
    mcdc_batch *b = NULL;
    int64_t version;
    int rc = mcdc_table_read_all(a->control, &b, &version, err);
    if (rc) return mcdc_error_wrap(err, "reading control table %s", a->cfg.control_table), rc;
    int64_t r = mcdc_control_find(b, a->cfg.bronze);
    if (r >= 0) {
        mcdc_cell l = mcdc_row_get(b, r, MCDC_C_END_LSN), t = mcdc_row_get(b, r, MCDC_C_END_COMMIT_TS);
        if (l.kind == MCDC_CELL_TEXT && t.kind == MCDC_CELL_INT && (size_t)l.i < sizeof cv->verdict_lsn) {
            cv->has_verdict = true;
            memcpy(cv->verdict_lsn, l.s, (size_t)l.i);
            cv->verdict_lsn[l.i] = 0;
            cv->verdict_us = t.i;
        }
    }
    r = mcdc_control_find(b, a->cfg.target);
    if (r >= 0) {
        cell_lsn(&cv->silver.applied, mcdc_row_get(b, r, MCDC_C_APPLIED_LSN));
        cell_lsn(&cv->silver.snapshot, mcdc_row_get(b, r, MCDC_C_SNAPSHOT_LSN));
        cell_lsn(&cv->silver.open, mcdc_row_get(b, r, MCDC_C_OPEN_SNAPSHOT_LSN));
        mcdc_cell w = mcdc_row_get(b, r, MCDC_C_SNAPSHOT_WAVE);
        cv->silver.has_wave = w.kind == MCDC_CELL_INT;
        cv->silver.wave = w.i;
        mcdc_cell f = mcdc_row_get(b, r, MCDC_C_FINALIZED_UNTIL);
        cv->has_fin = f.kind == MCDC_CELL_INT;
        cv->fin_us = f.i;
    }
    mcdc_batch_free(b);
    return MCDC_OK;
}

/* The open chunked snapshot's announced chunks, their bounds from the plans
 * table (read after the facts: its rows are written first). */
static int read_chunks(mcdc_apply *a, const mcdc_snapfacts *sf, const mcdc_snap_row *opened,
                       achunk **out, int32_t *n_out, json_t **cut, mcdc_error *err) {
    *out = NULL;
    *n_out = 0;
    *cut = NULL;
    const char *s = opened->max_lsn;
    mcdc_plan_rows pr = {0};
    int rc = mcdc_plans_load(&pr, a->plans, s, err);
    const json_t *info = rc ? NULL : mcdc_plans_whole(&pr, a->plans_name, "snapshot_open", opened->detail, err);
    if (rc == MCDC_OK && info == NULL) rc = err && err->code ? err->code : MCDC_E_CORRUPT;
    if (rc == MCDC_OK) *cut = json_incref(json_object_get(info, "keys"));
    achunk *v = NULL;
    int32_t n = 0;
    for (int i = 0; rc == MCDC_OK && i < sf->n; i++) {
        const mcdc_snap_row *r = &sf->rows[i];
        const char *of = json_string_value(json_object_get(r->detail, "snapshot"));
        if (r->event != MCDC_SNAP_CHUNK || of == NULL || strcmp(of, s) != 0) continue;
        const json_t *d = mcdc_plans_whole(&pr, a->plans_name, "snapshot_chunk", r->detail, err);
        if (d == NULL) {
            rc = err && err->code ? err->code : MCDC_E_CORRUPT;
            break;
        }
        achunk *x = mcdc_realloc(v, (size_t)(n + 1) * sizeof *x);
        if (x == NULL) {
            rc = nomem(err);
            break;
        }
        v = x;
        achunk *c = &v[n++];
        memset(c, 0, sizeof *c);
        json_t *ci = json_object_get(d, "chunk"), *wi = json_object_get(d, "wave");
        c->chunk = json_is_integer(ci) ? (int64_t)json_integer_value(ci) : -1;
        c->wave = json_is_integer(wi) ? (int64_t)json_integer_value(wi) : -1;
        snprintf(c->stamp, sizeof c->stamp, "%s", r->min_lsn);
        c->has_ts = r->has_min_ts;
        c->ts_us = r->min_ts_us;
        json_t *lo = json_object_get(d, "lo"), *hi = json_object_get(d, "hi");
        c->lo = lo && !json_is_null(lo) ? json_incref(lo) : NULL;
        c->hi = hi && !json_is_null(hi) ? json_incref(hi) : NULL;
    }
    mcdc_plan_rows_free(&pr);
    if (rc) {
        chunks_free(v, n);
        json_decref(*cut);
        *cut = NULL;
        return mcdc_error_wrap(err, "reading the chunks of snapshot %s of %s", s, a->cfg.bronze), rc;
    }
    *out = v;
    *n_out = n;
    return MCDC_OK;
}

static int cmp_i64(const void *x, const void *y) {
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

/* The change rows' schema: bronze's captured columns, _start_lsn and
 * _commit_ts (as bronze types them), then the rank's. */
static int change_schema(mcdc_schema **out, const mcdc_schema *bs, int32_t *n_cap,
                         mcdc_error *err) {
    int32_t n = 0;
    for (int32_t i = 0; i < bs->n_fields; i++) n += !is_meta(bs->fields[i].name);
    *n_cap = n;
    int rc = mcdc_schema_create(out, n + 5, err);
    int32_t k = 0;
    for (int32_t i = 0; rc == MCDC_OK && i < bs->n_fields; i++) {
        const mcdc_field *f = &bs->fields[i];
        if (!is_meta(f->name))
            rc = mcdc_schema_set(*out, k++, f->name, f->type, f->precision, f->scale, f->byte_width, true, err);
    }
    const char *more[2] = {"_start_lsn", "_commit_ts"};
    for (int i = 0; rc == MCDC_OK && i < 2; i++) {
        int32_t j = mcdc_schema_find(bs, more[i]);
        if (j < 0) {
            rc = mcdc_error_set(err, MCDC_E_MISMATCH, "bronze has no column %s: is it a bronze table?", more[i]);
            break;
        }
        const mcdc_field *f = &bs->fields[j];
        rc = mcdc_schema_set(*out, k++, f->name, f->type, f->precision, f->scale, f->byte_width, true, err);
    }
    if (rc == MCDC_OK) rc = mcdc_schema_set(*out, k++, "_operation", MCDC_TYPE_INT32, 0, 0, 0, true, err);
    if (rc == MCDC_OK) rc = mcdc_schema_set(*out, k++, "_command_id", MCDC_TYPE_INT32, 0, 0, 0, true, err);
    if (rc == MCDC_OK) rc = mcdc_schema_set(*out, k++, "_seqval", MCDC_TYPE_UTF8, 0, 0, 0, true, err);
    if (rc) {
        mcdc_schema_unref(*out);
        *out = NULL;
    }
    return rc;
}

static int check_bronze_types(const mcdc_apply *a, const mcdc_schema *bs, mcdc_error *err) {
    static const struct {
        const char *name;
        mcdc_type_id type;
    } want[] = {{"_capture_instance", MCDC_TYPE_UTF8}, {"_start_lsn", MCDC_TYPE_UTF8},
                {"_seqval", MCDC_TYPE_UTF8},           {"_operation", MCDC_TYPE_INT32},
                {"_command_id", MCDC_TYPE_INT32},      {"_snapshot", MCDC_TYPE_UTF8},
                {"_chunk", MCDC_TYPE_INT32}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int32_t j = mcdc_schema_find(bs, want[i].name);
        bool required = i < 4;
        if ((j < 0 && required) || (j >= 0 && bs->fields[j].type != want[i].type))
            return mcdc_error_set(err, MCDC_E_MISMATCH,
                                  "%s: column %s is %s, not the %s a bronze table of mssql-cdc "
                                  "has: nothing was applied",
                                  a->cfg.bronze, want[i].name,
                                  j < 0 ? "missing" : mcdc_type_name(bs->fields[j].type),
                                  mcdc_type_name(want[i].type));
    }
    return MCDC_OK;
}

static void warn_no_bronze(mcdc_apply *a) {
    if (a->warned_no_bronze) return;
    a->warned_no_bronze = true;
    mcdc_log(MCDC_LOG_WARN,
             "bronze %s does not exist: nothing applied to %s. Expected until the stream writes "
             "its first batch; otherwise check the name (a typo, or bronze and target swapped)",
             a->cfg.bronze, a->cfg.target);
}

/* The result's position fields from a state. */
static void result_state(mcdc_apply *a, const apply_state *s) {
    a->res.has_applied_lsn = s->applied.set;
    snprintf(a->res.applied_lsn, sizeof a->res.applied_lsn, "%s", s->applied.set ? s->applied.v : "");
    a->res.has_open_snapshot = s->open.set;
    snprintf(a->res.open_snapshot_lsn, sizeof a->res.open_snapshot_lsn, "%s", s->open.set ? s->open.v : "");
    a->res.snapshot_wave = s->has_wave ? s->wave : -1;
}

/* The stamps of the repairs the facts record now that they did not at the
 * version the last pass read (all of them when it read none, or that
 * version is gone): applying a repair again only costs a rewrite. */
static int new_repairs(mcdc_apply *a, const json_t *last_end, char (**stamps)[23], int32_t *n,
                       int64_t *facts_version, mcdc_error *err) {
    *stamps = NULL;
    *n = 0;
    silver_repairs now = {0}, before = {0};
    int rc = silver_repairs_load(&now, a->facts, a->cfg.bronze, -1, facts_version, err);
    json_t *fv = json_object_get(last_end, "facts_version");
    if (rc == MCDC_OK && now.n > 0 && json_is_integer(fv) && json_integer_value(fv) >= 0) {
        int64_t got;
        mcdc_error e2 = MCDC_ERROR_INIT;
        if (silver_repairs_load(&before, a->facts, a->cfg.bronze, (int64_t)json_integer_value(fv),
                                &got, &e2) != MCDC_OK)
            mcdc_log(MCDC_LOG_INFO, "%s: the facts at version %lld are gone (%s): every repair "
                                    "recorded is applied again",
                     a->cfg.target, (long long)json_integer_value(fv), e2.message);
    }
    if (rc == MCDC_OK && now.n > 0) {
        *stamps = mcdc_calloc((size_t)now.n, sizeof **stamps);
        if (*stamps == NULL) rc = nomem(err);
    }
    for (int32_t i = 0; rc == MCDC_OK && i < now.n; i++)
        if (!silver_repairs_has(&before, now.run_ids[i])) memcpy((*stamps)[(*n)++], now.stamps[i], 23);
    silver_repairs_free(&now);
    silver_repairs_free(&before);
    return rc;
}

static int by_stamp(const void *x, const void *y) {
    return strcmp(((const achunk *)x)->stamp, ((const achunk *)y)->stamp);
}

/* SCD2: pl->stamps, one row per distinct stamp of the chunks after wave
 * `after` (a wave's chunks share one), sorted by LSN. */
static int wave_stamps(apply_plan *pl, const achunk *chunks, int32_t n, int64_t after, mcdc_error *err) {
    achunk *v = mcdc_calloc((size_t)n, sizeof *v);
    char(*lsn)[23] = mcdc_calloc((size_t)n, sizeof *lsn);
    bool *has = mcdc_calloc((size_t)n, sizeof *has);
    int64_t *us = mcdc_calloc((size_t)n, sizeof *us);
    int rc = v && lsn && has && us ? MCDC_OK : nomem(err);
    int32_t m = 0, k = 0;
    for (int32_t i = 0; rc == MCDC_OK && i < n; i++)
        if (chunks[i].wave > after && strlen(chunks[i].stamp) == 22) v[m++] = chunks[i];
    if (rc == MCDC_OK && m > 1) qsort(v, (size_t)m, sizeof *v, by_stamp);
    for (int32_t i = 0; rc == MCDC_OK && i < m; i++) {
        if (k > 0 && strcmp(lsn[k - 1], v[i].stamp) == 0) {
            if (!has[k - 1] && v[i].has_ts) has[k - 1] = true, us[k - 1] = v[i].ts_us;
            continue;
        }
        memcpy(lsn[k], v[i].stamp, 23);
        has[k] = v[i].has_ts;
        us[k] = v[i].ts_us;
        k++;
    }
    if (rc == MCDC_OK && k > 0)
        rc = stamp_rows(&pl->stamps, pl, k, (const char(*)[23])lsn, has, us, err);
    mcdc_free(v);
    mcdc_free(lsn);
    mcdc_free(has);
    mcdc_free(us);
    return rc;
}

static int check_scd_type(const mcdc_apply *a, const mcdc_table_view *sv, mcdc_error *err);

static int plan_pass(mcdc_apply *a, const json_t *last_end, bool *idle, mcdc_error *err) {
    *idle = false;
    plan_clear(&a->plan);
    apply_plan *pl = &a->plan;
    control_view cv;
    mcdc_table_view *sv = NULL; /* a silver of another SCD type is refused before anything */
    int rc = mcdc_table_view_open(&sv, a->silver, -1, err);
    if (rc == MCDC_OK) rc = check_scd_type(a, sv, err);
    mcdc_table_view_free(sv);
    if (rc == MCDC_OK) rc = read_control(a, &cv, err);
    if (rc) return rc;
    a->has_fin = cv.has_fin;
    a->fin_us = cv.fin_us;
    result_state(a, &cv.silver);
    bool exists = false;
    rc = mcdc_table_exists(a->bronze, &exists, err);
    if (rc) return rc;
    a->res.bronze_found = exists;
    if (!exists) {
        warn_no_bronze(a);
        *idle = true;
        return MCDC_OK;
    }
    /* the facts: completed snapshots, and a chunked one still open */
    mcdc_snapfacts sf = {0};
    if (a->facts) rc = mcdc_snapfacts_load(&sf, a->facts, a->cfg.bronze, a->cfg.warehouse, NULL, err);
    if (rc) return rc;
    char(*rep_stamps)[23] = NULL;
    int32_t n_rep = 0;
    pl->facts_version = -1;
    if (a->facts) rc = new_repairs(a, last_end, &rep_stamps, &n_rep, &pl->facts_version, err);
    if (rc) {
        mcdc_snapfacts_free(&sf);
        return rc;
    }
    lsnopt newest = {0};
    const char *done = mcdc_snapfacts_done_max(&sf, NULL);
    if (done) lsn_set(&newest, done, strlen(done));
    const mcdc_snap_row *opened = a->facts ? mcdc_snapfacts_newest_chunked(&sf) : NULL;
    achunk *chunks = NULL;
    int32_t n_chunks = 0;
    json_t *cut = NULL;
    lsnopt s_open = {0};
    if (opened) lsn_set(&s_open, opened->max_lsn, strlen(opened->max_lsn));
    /* a history applying the open snapshot wave by wave reads its chunks at
     * its completion too: the waves it has not applied yet go at their stamps */
    bool hist_open = a->cfg.scd_type == 2 && opened && cv.silver.open.set &&
                     lsn_cmp(&cv.silver.open, &s_open) == 0;
    if (opened && s_open.set && (!newest.set || lsn_cmp(&s_open, &newest) > 0 || hist_open))
        rc = read_chunks(a, &sf, opened, &chunks, &n_chunks, &cut, err);
    /* bronze, pinned at one version from here on */
    mcdc_table_view *bv = NULL;
    if (rc == MCDC_OK) rc = mcdc_table_view_open(&bv, a->bronze, -1, err);
    if (rc == MCDC_OK && bv == NULL) rc = mcdc_error_set(err, MCDC_E_NOTFOUND, "bronze %s vanished", a->cfg.bronze);
    const mcdc_schema *bs = bv ? mcdc_table_view_schema(bv) : NULL;
    if (rc == MCDC_OK) rc = check_bronze_types(a, bs, err);
    if (rc == MCDC_OK) pl->bronze_version = mcdc_table_view_version(bv);
    if (rc == MCDC_OK) rc = change_schema(&pl->change_schema, bs, &pl->n_cap, err);
    for (int32_t k = 0; rc == MCDC_OK && k < a->n_keys; k++) {
        int32_t j = mcdc_schema_find(pl->change_schema, a->keys[k]);
        if (j < 0 || j >= pl->n_cap)
            rc = mcdc_error_set(err, MCDC_E_INVALID,
                                "key column '%s' is not a captured column of %s: give --keys the "
                                "source table's key columns as bronze names them",
                                a->keys[k], a->cfg.bronze);
    }
    bool has_snap_col = bs && mcdc_schema_find(bs, "_snapshot") >= 0;
    bool has_chunk_col = bs && mcdc_schema_find(bs, "_chunk") >= 0;
    bool has_cmd = bs && mcdc_schema_find(bs, "_command_id") >= 0;
    /* pass 1: the newest whole snapshot after the one rebuilt from */
    int64_t t0 = mcdc_monotonic_us();
    pass1 p1 = {.a = a, .after = cv.silver.snapshot, .err = err};
    if (rc == MCDC_OK) {
        const char *cols[5] = {"_capture_instance", "_operation", "_start_lsn"};
        int32_t nc = 3;
        p1.c_ci = 0, p1.c_op = 1, p1.c_lsn = 2, p1.c_snap = p1.c_chunk = -1;
        if (has_snap_col) p1.c_snap = nc, cols[nc++] = "_snapshot";
        if (has_chunk_col) p1.c_chunk = nc, cols[nc++] = "_chunk";
        snap_filter filt = {.skip_chunk_files = a->facts && opened, .p1 = &p1};
        mcdc_table_scan sc = MCDC_TABLE_SCAN_INIT;
        sc.version = pl->bronze_version;
        sc.columns = cols;
        sc.n_columns = nc;
        lsnopt after = lsn_next(&cv.silver.snapshot); /* rows after the one rebuilt from */
        if (after.set) {
            sc.prune_column = "_start_lsn";
            sc.lo = (mcdc_scan_bound){true, after.v, 0};
        }
        sc.file_fn = snapshot_files;
        sc.file_ctx = &filt;
        int64_t vr;
        rc = mcdc_table_scan_run(a->bronze, &sc, pass1_rows, &p1, &vr, NULL, err);
        if (rc == MCDC_OK) rc = p1.rc;
    }
    if (rc == MCDC_OK && p1.chunk_rows && (a->facts == NULL || opened == NULL))
        rc = a->facts == NULL
                 ? mcdc_error_set(err, MCDC_E_INVALID,
                                  "%s holds rows of a chunked snapshot: pass --facts-table (the "
                                  "stream's), whose rows say which chunks arrived and when the "
                                  "snapshot is complete. Nothing was applied",
                                  a->cfg.bronze)
                 : mcdc_error_set(err, MCDC_E_INVALID,
                                  "%s holds rows of a chunked snapshot, but %s has no "
                                  "'snapshot_open' row for target '%s': is bronze named otherwise "
                                  "in the stream's --target? Nothing was applied",
                                  a->cfg.bronze, a->cfg.facts_table, a->cfg.bronze);
    /* what the pass does */
    lsnopt snapshot = newest;
    lsn_max(&snapshot, &cv.silver.snapshot);
    lsn_max(&snapshot, &p1.whole);
    bool is_open = s_open.set && (!snapshot.set || lsn_cmp(&s_open, &snapshot) > 0);
    pl->is_open = is_open;
    bool rebuild = (!cv.silver.applied.set && !cv.silver.open.set) ||
                   (snapshot.set && (!cv.silver.snapshot.set || lsn_cmp(&snapshot, &cv.silver.snapshot) > 0));
    int64_t after = !rebuild && lsn_cmp(&cv.silver.open, &s_open) == 0 && cv.silver.open.set &&
                            cv.silver.has_wave
                        ? cv.silver.wave
                        : -1;
    /* its completion: a rebuild from S, the chunks after the last wave applied
     * taken as waves */
    bool hist_done = hist_open && rebuild && !is_open && lsn_cmp(&snapshot, &s_open) == 0;
    if (hist_done) after = cv.silver.has_wave ? cv.silver.wave : -1;
    int64_t *new_chunks = NULL;
    int32_t n_new = 0;
    lsnopt first = {0};
    int64_t wave_max = after;
    if (rc == MCDC_OK && (is_open || hist_done) && n_chunks > 0) {
        new_chunks = mcdc_calloc((size_t)n_chunks, sizeof *new_chunks);
        if (new_chunks == NULL) rc = nomem(err);
        for (int32_t i = 0; rc == MCDC_OK && i < n_chunks; i++) {
            if (chunks[i].wave <= after) continue;
            new_chunks[n_new++] = chunks[i].chunk;
            lsnopt st;
            lsn_set(&st, chunks[i].stamp, strlen(chunks[i].stamp));
            if (!first.set || lsn_cmp(&st, &first) < 0) first = st;
            if (chunks[i].wave > wave_max) wave_max = chunks[i].wave;
        }
        if (n_new > 1) qsort(new_chunks, (size_t)n_new, sizeof *new_chunks, cmp_i64);
    }
    /* a history's waves: a version a chunk row opens or a chunk closes
     * begins or ends at its stamp, at the commit time that maps to */
    if (rc == MCDC_OK && n_new > 0 && a->cfg.scd_type == 2)
        rc = wave_stamps(pl, chunks, n_chunks, after, err);
    /* range deletes: one key, the one the chunks are cut on, of a type
     * SQL Server and we order alike */
    if (rc == MCDC_OK && n_new > 0 && a->n_keys == 1 && json_is_array(cut) && json_array_size(cut) == 1 &&
        json_string_value(json_array_get(cut, 0)) &&
        strcmp(json_string_value(json_array_get(cut, 0)), a->keys[0]) == 0) {
        mcdc_type_id kt = pl->change_schema->fields[mcdc_schema_find(pl->change_schema, a->keys[0])].type;
        if (range_type(kt)) {
            pl->ranges = mcdc_calloc((size_t)n_new, sizeof *pl->ranges);
            if (pl->ranges == NULL) rc = nomem(err);
            for (int32_t i = 0; rc == MCDC_OK && i < n_chunks; i++) {
                const achunk *c = &chunks[i];
                if (c->wave <= after) continue;
                silver_range r = {0};
                r.has_lo = c->lo != NULL;
                r.has_hi = c->hi != NULL;
                if ((r.has_lo && !bound_value(c->lo, kt, true, &r.lo)) ||
                    (r.has_hi && !bound_value(c->hi, kt, false, &r.hi)) ||
                    !silver_lsn_parse(r.stamp, c->stamp, strlen(c->stamp)))
                    continue; /* no key surely inside */
                pl->ranges[pl->n_ranges++] = r;
            }
            if (pl->n_ranges > 1) qsort(pl->ranges, (size_t)pl->n_ranges, sizeof *pl->ranges, by_lo);
        }
    }
    int64_t t1 = mcdc_monotonic_us();
    /* pass 2: the rows to rank */
    pass2 p2 = {.a = a, .pl = pl, .rebuild = rebuild, .snapshot = snapshot, .applied = cv.silver.applied,
                .s_open = s_open, .first = first, .new_chunks = new_chunks, .n_new = n_new,
                .history = a->cfg.scd_type == 2 && rebuild, .changes_after = snapshot,
                .keep_stamps = hist_done && pl->n_ranges > 0};
    if (p2.history && cv.silver.applied.set && lsn_cmp(&cv.silver.applied, &snapshot) < 0)
        p2.changes_after = cv.silver.applied;
    /* a rebuild takes the repairs after its snapshot as changes; one below
     * it is older than the snapshot's rows */
    if (!rebuild && n_rep > 0) {
        p2.rep_stamps = (const char(*)[23])rep_stamps;
        p2.n_rep = n_rep;
        for (int32_t i = 0; i < n_rep; i++) {
            lsnopt x;
            lsn_set(&x, rep_stamps[i], 22);
            if (!p2.rep_min.set || lsn_cmp(&x, &p2.rep_min) < 0) p2.rep_min = x;
        }
    }
    if (rc == MCDC_OK) {
        int32_t k = pl->n_cap;
        const char **cols = mcdc_calloc((size_t)k + 9, sizeof *cols);
        p2.from = mcdc_calloc((size_t)k + 5, sizeof *p2.from);
        if (!cols || !p2.from) rc = nomem(err);
        int32_t nc = 0;
        for (int32_t i = 0; cols && i < k; i++) cols[nc++] = pl->change_schema->fields[i].name;
        if (cols) {
            p2.n_cap = k;
            p2.c_lsn = nc, cols[nc++] = "_start_lsn";
            p2.c_ts = nc, cols[nc++] = "_commit_ts";
            p2.c_op = nc, cols[nc++] = "_operation";
            p2.c_seq = nc, cols[nc++] = "_seqval";
            p2.c_ci = nc, cols[nc++] = "_capture_instance";
            p2.c_cmd = p2.c_snap = p2.c_chunk = -1;
            if (has_cmd) p2.c_cmd = nc, cols[nc++] = "_command_id";
            if (has_snap_col) p2.c_snap = nc, cols[nc++] = "_snapshot";
            if (has_chunk_col) p2.c_chunk = nc, cols[nc++] = "_chunk";
            for (int32_t c = 0; p2.from && c < k + 3; c++) p2.from[c] = c;
            p2.n_keys = a->n_keys;
            for (int32_t i = 0; i < a->n_keys; i++)
                p2.key_cols[i] = mcdc_schema_find(pl->change_schema, a->keys[i]); /* < k: same place */
            if (p2.from) p2.from[k + 3] = p2.c_cmd, p2.from[k + 4] = p2.c_seq;
        }
        int32_t keyc[SILVER_KEYS_MAX];
        for (int32_t i = 0; i < a->n_keys; i++) keyc[i] = mcdc_schema_find(pl->change_schema, a->keys[i]);
        char prefix[64];
        snprintf(prefix, sizeof prefix, "%s", SPILL_DIR);
        silver_sorter_cfg so = {.schema = pl->change_schema, .key_cols = keyc, .n_keys = a->n_keys,
                                .ranked = true, .history = a->cfg.scd_type == 2,
                                .lsn_col = k, .op_col = k + 2, .cmd_col = k + 3,
                                .seq_col = k + 4, .held_cols = k + 3, /* rank-only: dropped */
                                .keep_tags = SILVER_TAG_BASE | SILVER_TAG_WAVE | SILVER_TAG_REPAIR,
                                .memory_bytes = a->cfg.memory_mb * 1024 * 1024,
                                .spill = mcdc_table_storage(a->silver), .spill_prefix = prefix};
        if (rc == MCDC_OK) rc = silver_sorter_create(&pl->changes, &so, err);
        mcdc_table_scan sc = MCDC_TABLE_SCAN_INIT;
        sc.version = pl->bronze_version;
        sc.columns = cols;
        sc.n_columns = nc;
        /* the oldest row wanted: past the position, a rebuild's snapshot, the
         * first new chunk's stamp */
        lsnopt lo = {0};
        bool bounded = false;
        if (!rebuild && cv.silver.applied.set) lo = lsn_next(&cv.silver.applied), bounded = true;
        else if (rebuild && snapshot.set) lo = snapshot, bounded = true;
        if (rebuild && snapshot.set && lsn_cmp(&p2.changes_after, &snapshot) < 0) lo = lsn_next(&p2.changes_after);
        if (bounded && n_new > 0 && lsn_cmp(&first, &lo) < 0) lo = first;
        if (bounded && p2.n_rep > 0 && lsn_cmp(&p2.rep_min, &lo) < 0) lo = p2.rep_min;
        if (bounded) {
            sc.prune_column = "_start_lsn";
            sc.lo = (mcdc_scan_bound){true, lo.v, 0};
        }
        int64_t vr;
        if (rc == MCDC_OK) rc = mcdc_table_scan_run(a->bronze, &sc, pass2_rows, &p2, &vr, NULL, err);
        if (rc == MCDC_OK) rc = silver_sorter_finish(pl->changes, err);
        mcdc_free(cols);
    }
    mcdc_free(p2.idx);
    mcdc_free(p2.tags);
    mcdc_free(p2.is_rep);
    mcdc_free(rep_stamps);
    mcdc_free(p2.from);
    mcdc_buf_free(&p2.k1);
    mcdc_buf_free(&p2.k2);
    if (rc == MCDC_OK)
        mcdc_log(MCDC_LOG_INFO, "%s: bronze version %lld read: its snapshots in %.3f s, %lld rows "
                                "to rank in %.3f s (%lld runs spilled, %lld merges of runs; %.1f "
                                "of %lld MB held at most)",
                 a->cfg.bronze, (long long)pl->bronze_version, (double)(t1 - t0) / 1e6,
                 (long long)silver_sorter_rows(pl->changes),
                 (double)(mcdc_monotonic_us() - t1) / 1e6, (long long)silver_sorter_runs(pl->changes),
                 (long long)silver_sorter_merges(pl->changes),
                 (double)silver_sorter_held_max(pl->changes) / (1024.0 * 1024.0),
                 (long long)a->cfg.memory_mb);
    if (rc == MCDC_OK && !has_cmd && bs)
        mcdc_log(MCDC_LOG_INFO, "%s has no _command_id (includeCommandId=false): the changes of one "
                                "transaction are ordered by _seqval", a->cfg.bronze);
    /* a history's rebuild: the snapshot's commit time, as its rows, the
     * changes around it or its facts row tell it (none may: NULL) */
    if (rc == MCDC_OK && p2.history && snapshot.set) {
        bool has = true;
        int64_t us = p2.has_ts_snap ? p2.ts_snap : p2.has_ts_le ? p2.ts_le : p2.has_ts_gt ? p2.ts_gt : 0;
        if (!p2.has_ts_snap && !p2.has_ts_le && !p2.has_ts_gt) {
            has = false;
            for (int i = 0; i < sf.n && !has; i++)
                if (strcmp(sf.rows[i].max_lsn, snapshot.v) == 0 && sf.rows[i].has_max_ts)
                    has = true, us = sf.rows[i].max_ts_us;
        }
        rc = stamp_rows(&pl->close, pl, 1, (const char(*)[23]) & snapshot.v, &has, &us, err);
    }
    /* the state after the pass */
    pl->rebuild = rebuild;
    pl->merged = p2.top.set || (rebuild && snapshot.set) || n_new > 0 || p2.repair_rows > 0;
    if (p2.repair_rows > 0)
        mcdc_log(MCDC_LOG_INFO, "%s: %lld rows of %d repairs recorded since the last pass",
                 a->cfg.bronze, (long long)p2.repair_rows, (int)p2.n_rep);
    pl->start = cv.silver;
    pl->end.applied = cv.silver.applied;
    lsn_max(&pl->end.applied, &snapshot);
    lsn_max(&pl->end.applied, &p2.top);
    pl->end.snapshot = rebuild ? snapshot : cv.silver.snapshot;
    if (is_open) {
        pl->end.open = s_open;
        pl->end.has_wave = wave_max >= 0;
        pl->end.wave = wave_max;
    }
    /* the verdict: bronze's, read before bronze, unless held */
    pl->has_verdict = cv.has_verdict && a->facts && !is_open;
    if (pl->has_verdict) {
        snprintf(pl->verdict_lsn, sizeof pl->verdict_lsn, "%s", cv.verdict_lsn);
        pl->verdict_us = cv.verdict_us;
    }
    mcdc_free(new_chunks);
    chunks_free(chunks, n_chunks);
    json_decref(cut);
    mcdc_table_view_free(bv);
    mcdc_snapfacts_free(&sf);
    if (rc) {
        plan_clear(pl);
        return rc;
    }
    if (!pl->merged && state_eq(&pl->start, &pl->end)) {
        /* nothing new: only the verdict may move */
        bool has_table = false;
        rc = mcdc_table_exists(a->silver, &has_table, err);
        if (rc == MCDC_OK && has_table) {
            *idle = true;
            if (pl->has_verdict) {
                mcdc_verdict v;
                if (mcdc_verdict_advance_table(&v, a->control, a->cfg.target, pl->verdict_lsn,
                                               pl->verdict_us, a->cfg.granularity, err) == MCDC_OK &&
                    v.found) {
                    a->has_fin = true;
                    a->fin_us = v.finalized_until_us;
                } else if (err && err->code) {
                    mcdc_log(MCDC_LOG_WARN, "finalized_until of %s was not advanced (%s); it is "
                             "retried after the next pass", a->cfg.target, err->message);
                    mcdc_error_clear(err);
                }
            }
            plan_clear(pl);
        }
    }
    return rc;
}

/* ---- the SCD type ---------------------------------------------------------------------------- */


/* Silver's SCD type (its table property, 1 when absent, checked against its
 * columns) against the one asked for: another is refused. sv NULL: no table
 * yet. A table no kind property marks (the reference's silver) that lacks a
 * key column is no silver of this source: refused too. */
static int check_scd_type(const mcdc_apply *a, const mcdc_table_view *sv, mcdc_error *err) {
    if (sv == NULL) return MCDC_OK;
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
    if (*image == NULL || *tracked == NULL) return nomem(err);
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
    if (*c_of == NULL || *e_of == NULL) return nomem(err);
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

static void empty_spill(mcdc_apply *a) {
    mcdc_storage *st = mcdc_table_storage(a->silver);
    mcdc_storage_listing l = {0};
    if (mcdc_storage_list(st, SPILL_DIR, &l, NULL) == MCDC_OK)
        for (size_t i = 0; i < l.count; i++) {
            char key[512];
            snprintf(key, sizeof key, "%s%s", SPILL_DIR, l.entries[i].name);
            mcdc_storage_delete(st, key, NULL);
        }
    mcdc_storage_listing_free(&l);
}

static json_t *pass_meta(const mcdc_apply *a, const silver_merge_out *o) {
    return json_pack("{s:{s:s, s:I, s:b, s:I, s:I, s:I}}", "apply", "bronze", a->cfg.bronze,
                     "bronze_version", (json_int_t)a->plan.bronze_version, "rebuilt",
                     a->plan.rebuild && a->plan.merged, "inserted", (json_int_t)o->inserted,
                     "updated", (json_int_t)o->updated, "deleted", (json_int_t)o->deleted);
}

static int merge_pass(mcdc_apply *a, mcdc_frame *f, const mcdc_unit *u, mcdc_unit_result *res,
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
        if (rc == MCDC_OK) rc = check_scd_type(a, sv, err);
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
                              .file_rows = a->cfg.file_rows, .memory_bytes = a->cfg.memory_mb * 1024 * 1024,
                              .spill = mcdc_table_storage(a->silver), .spill_prefix = SPILL_DIR,
                              .props = &props, .ctx = &a->ctx, .unit = u->id};
        if (rc == MCDC_OK && !pl->merged) {
            /* no rows to merge: the pass's commit records its position alone */
            rc = mcdc_appender_open(&out.appender, a->silver, os, &props, err);
        } else if (rc == MCDC_OK) {
            int64_t t0 = mcdc_monotonic_us();
            rc = silver_mor_wanted(&in) ? silver_mor_run(&out, &in, err)
                                        : silver_merge_run(&out, &in, err);
            if (rc == MCDC_OK)
                mcdc_log(MCDC_LOG_INFO, "%s: merged%s in %.3f s (%.3f s reading files, %.3f s "
                                        "writing): %lld files read, %lld written, %lld rows kept, "
                                        "%lld inserted, %lld updated, %lld deleted",
                         a->cfg.target, out.mor ? " on read" : "",
                         (double)(mcdc_monotonic_us() - t0) / 1e6,
                         (double)out.read_us / 1e6, (double)out.write_us / 1e6,
                         (long long)out.files_read, (long long)out.files_written, (long long)out.kept,
                         (long long)out.inserted, (long long)out.updated, (long long)out.deleted);
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
            mcdc_table_commit c = {.operation = "MERGE", .remove_paths = (const char *const *)out.removes,
                                   .n_removes = out.n_removes, .read_version = read_version,
                                   .readd_dvs = out.readd_dvs};
            rc = mcdc_frame_commit_data_with(f, u, out.appender, pass_meta(a, &out), &c, &skipped, err);
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

/* ---- the ledger: silver's txn plans a pass, the control row commits it --------------------- */

/* The userMetadata of silver's commit of unit n, parsed; NULL when the log
 * no longer has it. */
static json_t *unit_meta(mcdc_apply *a, int64_t n, mcdc_error *err, int *rc) {
    char *um = NULL;
    int64_t version;
    *rc = mcdc_table_txn_commit(a->silver, APPLY_APP_ID, n, &um, &version, err);
    if (*rc == MCDC_E_NOTFOUND) {
        *rc = MCDC_OK;
        mcdc_error_clear(err);
        return NULL;
    }
    json_error_t je;
    json_t *m = *rc == MCDC_OK && um ? json_loads(um, 0, &je) : NULL;
    mcdc_free(um);
    return m;
}

static const char *l_id(void *self) {
    (void)self;
    return APPLY_LEDGER_ID;
}
static const char *l_name(void *self) { return ((mcdc_apply *)self)->cfg.target; }
static bool l_fresh(void *self) {
    mcdc_apply *a = self;
    int64_t have = -1;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_table_txn_version(a->silver, APPLY_APP_ID, &have, &e);
    return have < 0;
}
static int l_bind(void *self, const json_t *start, mcdc_error *err) {
    (void)self, (void)start, (void)err;
    return MCDC_OK;
}
static const json_t *l_start(void *self) {
    (void)self;
    return NULL;
}

static int l_last(void *self, int64_t *planned, int64_t *committed, mcdc_error *err) {
    mcdc_apply *a = self;
    int64_t have;
    int rc = mcdc_table_txn_version(a->silver, APPLY_APP_ID, &have, err);
    *planned = *committed = have;
    if (rc || have < 0) return rc;
    json_t *m = unit_meta(a, have, err, &rc);
    json_t *p = json_object_get(m, "planned");
    if (rc == MCDC_OK && p) {
        apply_state s, e;
        state_of_json(&s, json_object_get(p, "start"));
        state_of_json(&e, json_object_get(p, "end"));
        control_view cv;
        rc = read_control(a, &cv, err);
        /* merged, but the control row still holds the state before it */
        if (rc == MCDC_OK && state_eq(&cv.silver, &s) && !state_eq(&s, &e)) *committed = have - 1;
    }
    json_decref(m);
    return rc;
}

static int l_read_plan(void *self, int64_t n, json_t **start, json_t **end, mcdc_error *err) {
    mcdc_apply *a = self;
    *start = *end = NULL;
    if (n == a->mem_unit && a->mem_start) {
        *start = json_incref(a->mem_start);
        *end = json_incref(a->mem_end);
        return MCDC_OK;
    }
    int rc;
    json_t *m = unit_meta(a, n, err, &rc);
    json_t *p = json_object_get(m, "planned");
    *start = json_incref(json_object_get(p, "start"));
    *end = json_incref(json_object_get(p, "end"));
    json_decref(m);
    if (rc == MCDC_OK && *start == NULL) *start = json_object();
    if (rc == MCDC_OK && *end == NULL) *end = json_object();
    return rc;
}

static int l_write_plan(void *self, int64_t n, const json_t *start, const json_t *end,
                        mcdc_error *err) {
    mcdc_apply *a = self;
    json_decref(a->mem_start);
    json_decref(a->mem_end);
    a->mem_unit = n;
    a->mem_start = json_deep_copy(start);
    a->mem_end = json_deep_copy(end);
    return a->mem_start && a->mem_end ? MCDC_OK : nomem(err);
}

static int l_read_commit(void *self, int64_t n, mcdc_ckpt_commit *out, mcdc_error *err) {
    (void)self, (void)err;
    out->rows = 0;
    out->data_txn = n;
    return MCDC_OK;
}

static int decide_state(void *ctx, bool exists, mcdc_cell *cells, bool *write, mcdc_error *err) {
    (void)exists, (void)err;
    const apply_state *s = ctx;
    cells[MCDC_C_APPLIED_LSN] = s->applied.set ? mcdc_cell_text(s->applied.v) : mcdc_cell_null();
    cells[MCDC_C_SNAPSHOT_LSN] = s->snapshot.set ? mcdc_cell_text(s->snapshot.v) : mcdc_cell_null();
    cells[MCDC_C_OPEN_SNAPSHOT_LSN] = s->open.set ? mcdc_cell_text(s->open.v) : mcdc_cell_null();
    cells[MCDC_C_SNAPSHOT_WAVE] = s->has_wave ? mcdc_cell_int(s->wave) : mcdc_cell_null();
    *write = true;
    return MCDC_OK;
}

static int l_write_commit(void *self, int64_t n, const mcdc_ckpt_commit *m, mcdc_error *err) {
    (void)n, (void)m;
    mcdc_apply *a = self;
    bool changed;
    int rc = mcdc_control_update(a->control, a->cfg.target, decide_state, &a->commit_end, &changed, err);
    if (rc) mcdc_error_wrap(err, "recording silver's position in %s", a->cfg.control_table);
    return rc;
}

static const mcdc_ledger_ops APPLY_LEDGER = {
    .id = l_id,
    .name = l_name,
    .fresh = l_fresh,
    .bind = l_bind,
    .start = l_start,
    .last = l_last,
    .read_plan = l_read_plan,
    .write_plan = l_write_plan,
    .read_commit = l_read_commit,
    .write_commit = l_write_commit,
    .owns = NULL,
};

/* ---- the job ------------------------------------------------------------------------------ */

static json_t *end_json(const apply_plan *pl) {
    json_t *j = state_json(&pl->end);
    if (j == NULL) return NULL;
    json_object_set_new(j, "bronze_version", json_integer(pl->bronze_version));
    json_object_set_new(j, "facts_version", json_integer(pl->facts_version));
    if (pl->has_verdict) {
        json_object_set_new(j, "verdict_lsn", json_string(pl->verdict_lsn));
        json_object_set_new(j, "verdict_us", json_integer(pl->verdict_us));
    }
    return j;
}

static int j_plan(void *job, const json_t *last_end, json_t **start, json_t **end, bool *idle,
                  mcdc_error *err) {
    mcdc_apply *a = job;
    if (a->cfg.trigger == MCDC_TRIGGER_ONCE && a->fresh_passes > 0) {
        *idle = true; /* one pass (a replay of a pass killed before does not count) */
        return MCDC_OK;
    }
    int rc = plan_pass(a, last_end, idle, err);
    if (rc || *idle) return rc;
    a->planned = true;
    *start = state_json(&a->plan.start);
    *end = end_json(&a->plan);
    if (*start == NULL || *end == NULL) return nomem(err);
    return MCDC_OK;
}

static bool verdict_of(const json_t *end, int64_t *us, char lsn[32]) {
    const char *l = json_string_value(json_object_get(end, "verdict_lsn"));
    json_t *t = json_object_get(end, "verdict_us");
    if (l == NULL || !json_is_integer(t)) return false;
    *us = (int64_t)json_integer_value(t);
    snprintf(lsn, 32, "%s", l);
    return true;
}

static int j_run(void *job, mcdc_frame *f, const mcdc_unit *u, mcdc_unit_result *res,
                 mcdc_error *err) {
    mcdc_apply *a = job;
    state_of_json(&a->commit_end, u->end);
    int rc = MCDC_OK;
    if (!u->data_done) {
        MCDC_ASSERT(a->planned);
        rc = merge_pass(a, f, u, res, err);
        if (rc == MCDC_OK && a->plan.rebuild && a->plan.merged) a->res.rebuilt = true;
    }
    res->data_committed = rc == MCDC_OK;
    res->has_end_time = rc == MCDC_OK && verdict_of(u->end, &res->end_commit_us, res->end_lsn);
    return rc;
}

static bool j_position_time(void *job, const json_t *pos, int64_t *commit_us, char lsn[32]) {
    (void)job;
    return verdict_of(pos, commit_us, lsn);
}

static void j_done(void *job, const mcdc_unit *u, const mcdc_unit_result *res,
                   const mcdc_verdict *v) {
    (void)res;
    mcdc_apply *a = job;
    result_state(a, &a->commit_end);
    if (v && v->found) {
        a->has_fin = true;
        a->fin_us = v->finalized_until_us;
    }
    a->res.passes++;
    a->res.has_finalized_until = a->has_fin;
    a->res.finalized_until_us = a->fin_us;
    int64_t ver;
    if (mcdc_table_version(a->silver, &ver, NULL) == MCDC_OK) a->res.silver_version = ver;
    (void)u;
    a->fresh_passes += a->planned;
    plan_clear(&a->plan);
    a->planned = false;
    if (a->fn) a->fn(a->fn_ctx, &a->res);
}

static const mcdc_job_ops APPLY_OPS = {
    .kind = "apply",
    .plan = j_plan,
    .run = j_run,
    .position_time = j_position_time,
    .done = j_done,
};

/* ---- the public API ------------------------------------------------------------------------ */

static int copy_str(mcdc_apply *a, const char **s, mcdc_error *err) {
    if (*s == NULL) return MCDC_OK;
    char **v = mcdc_realloc(a->strings, (size_t)(a->n_strings + 1) * sizeof *v);
    if (v == NULL) return nomem(err);
    a->strings = v;
    if ((v[a->n_strings] = mcdc_strdup(*s)) == NULL) return nomem(err);
    *s = v[a->n_strings++];
    return MCDC_OK;
}

static void log_to_host(void *user, mcdc_log_level level, const char *msg) {
    mcdc_apply *a = user;
    if (a->cfg.log_fn) a->cfg.log_fn(a->cfg.log_user, level, msg);
    else mcdc_log_stderr(level, msg);
}

int mcdc_apply_create(mcdc_apply **out, const mcdc_opts *opts, const mcdc_apply_cfg *cfg,
                      mcdc_error *err) {
    if (out == NULL || cfg == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_apply_create: a NULL argument");
    *out = NULL;
    /* the caller's version's fields, the defaults after them */
    mcdc_apply_cfg given;
    int rc = mcdc_cfg_copy(&given, sizeof given, MCDC_CFG_APPLY, cfg, err);
    if (rc) return rc;
    cfg = &given;
    if (cfg->scd_type < 0 || cfg->scd_type > 2)
        return mcdc_error_set(err, MCDC_E_INVALID, "SCD type %d: apply keeps type 1 (the current "
                              "state) or 2 (a history)", (int)cfg->scd_type);
    if (cfg->n_track_history_columns < 0 || cfg->n_track_history_columns > MCDC_COLUMNS_MAX ||
        (cfg->n_track_history_columns > 0 &&
         (cfg->scd_type != 2 || cfg->track_history_columns == NULL)))
        return mcdc_error_set(err, MCDC_E_INVALID, "track_history_columns needs scd_type 2 (a "
                              "history): type 1 keeps no versions");
    const char *missing = cfg->bronze == NULL ? "bronze" : cfg->target == NULL ? "target"
                          : cfg->control_table == NULL ? "control_table" : NULL;
    if (missing) return mcdc_error_set(err, MCDC_E_INVALID, "apply needs %s", missing);
    const char *opt_ci = opts ? mcdc_opt_capture_instance(opts) : NULL;
    if (cfg->capture_instance && opt_ci && !mcdc_str_ieq(cfg->capture_instance, opt_ci))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "--capture-instance '%s' and the captureInstance option '%s' name "
                              "two capture instances: give one, the stream's",
                              cfg->capture_instance, opt_ci);
    if (cfg->deletion_vectors && cfg->scd_type == 2)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "--deletion-vectors merges SCD type 1 on read; a type 2 history is "
                              "copy-on-write only: leave --deletion-vectors out");
    const char *ci = cfg->capture_instance ? cfg->capture_instance : opt_ci;
    if (ci == NULL || *ci == 0)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "apply needs the capture instance: --capture-instance, or the "
                              "stream's source options with captureInstance");
    bool can_connect = opts && mcdc_opt_connection_string(opts) && mcdc_opt_capture_instance(opts);
    if ((cfg->keys == NULL || cfg->n_keys <= 0) && !can_connect)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "apply needs the key columns: --keys, or the stream's source "
                              "options to read them from the capture instance's unique index");
    if (cfg->n_keys > SILVER_KEYS_MAX)
        return mcdc_error_set(err, MCDC_E_INVALID, "%d key columns: at most %d", (int)cfg->n_keys,
                              SILVER_KEYS_MAX);
    if (cfg->granularity != MCDC_GRANULARITY_HOUR && cfg->granularity != MCDC_GRANULARITY_MINUTE &&
        cfg->granularity != MCDC_GRANULARITY_DAY)
        return mcdc_error_set(err, MCDC_E_INVALID, "granularity %d is not hour, minute or day",
                              (int)cfg->granularity);
    if (cfg->trigger < MCDC_TRIGGER_DEFAULT || cfg->trigger > MCDC_TRIGGER_ONCE ||
        (cfg->trigger == MCDC_TRIGGER_PROCESSING_TIME &&
         (cfg->processing_time_ms <= 0 || cfg->processing_time_ms > MCDC_PROCESSING_TIME_MS_MAX)))
        return mcdc_error_set(err, MCDC_E_INVALID, "a bad trigger (processingTime needs 1 ms to a week)");
    if (cfg->memory_mb < 0 || cfg->memory_mb > 1024 * 1024 || cfg->file_rows < 0 || cfg->max_passes < 0)
        return mcdc_error_set(err, MCDC_E_INVALID, "memory_mb, file_rows and max_passes must be >= 0");
    mcdc_apply *a = mcdc_calloc(1, sizeof *a);
    if (a == NULL) return nomem(err);
    a->cfg = *cfg;
    a->cfg.version = MCDC_APPLY_CFG_VERSION;
    if (a->cfg.scd_type == 0) a->cfg.scd_type = 1;
    a->cfg.track_history_columns = NULL;
    a->cfg.capture_instance = ci;
    a->opts = can_connect ? opts : NULL;
    if (a->cfg.memory_mb == 0) a->cfg.memory_mb = SILVER_SORT_BYTES_DEFAULT / (1024 * 1024);
    const char **strs[] = {&a->cfg.bronze, &a->cfg.target, &a->cfg.control_table, &a->cfg.facts_table,
                           &a->cfg.warehouse, &a->cfg.capture_instance};
    for (size_t i = 0; rc == MCDC_OK && i < sizeof strs / sizeof strs[0]; i++) rc = copy_str(a, strs[i], err);
    a->cfg.keys = NULL;
    if (rc == MCDC_OK && cfg->keys && cfg->n_keys > 0) {
        a->keys = mcdc_calloc((size_t)cfg->n_keys, sizeof *a->keys);
        if (a->keys == NULL) rc = nomem(err);
        for (int32_t k = 0; rc == MCDC_OK && k < cfg->n_keys; k++) {
            if (cfg->keys[k] == NULL || *cfg->keys[k] == 0)
                rc = mcdc_error_set(err, MCDC_E_INVALID, "key column %d is empty", (int)k);
            else if ((a->keys[k] = mcdc_strdup(cfg->keys[k])) == NULL) rc = nomem(err);
            else a->n_keys = k + 1;
        }
    }
    if (rc == MCDC_OK && cfg->n_track_history_columns > 0) {
        a->track = mcdc_calloc((size_t)cfg->n_track_history_columns, sizeof *a->track);
        if (a->track == NULL) rc = nomem(err);
        for (int32_t k = 0; rc == MCDC_OK && k < cfg->n_track_history_columns; k++) {
            const char *t = cfg->track_history_columns[k];
            if (t == NULL || *t == 0)
                rc = mcdc_error_set(err, MCDC_E_INVALID, "track_history_columns: column %d is empty", (int)k);
            else if ((a->track[k] = mcdc_strdup(t)) == NULL) rc = nomem(err);
            else a->n_track = k + 1;
        }
    }
    mcdc_ctx_take_test_hooks(&a->ctx, opts);
    a->sink = (mcdc_log_sink){log_to_host, a, cfg->log_level};
    if (rc) {
        mcdc_apply_free(a);
        return rc;
    }
    *out = a;
    return MCDC_OK;
}

void mcdc_apply_request_stop(mcdc_apply *a) {
    if (a) atomic_store(&a->ctx.stop, 1);
}

static void close_run(mcdc_apply *a) {
    plan_clear(&a->plan);
    mcdc_table_close(a->bronze);
    mcdc_table_close(a->silver);
    mcdc_table_close(a->control);
    mcdc_table_close(a->facts);
    mcdc_table_close(a->plans);
    mcdc_changes_close(a->changes);
    mcdc_free(a->plans_name);
    for (int32_t i = 0; i < a->n_ours; i++) mcdc_free(a->ours[i]);
    for (int32_t i = 0; i < a->n_others; i++) mcdc_free(a->others[i]);
    mcdc_free(a->ours);
    mcdc_free(a->others);
    json_decref(a->mem_start);
    json_decref(a->mem_end);
    a->bronze = a->silver = a->control = a->facts = a->plans = NULL;
    a->changes = NULL;
    a->plans_name = NULL;
    a->ours = a->others = NULL;
    a->n_ours = a->n_others = 0;
    a->mem_start = a->mem_end = NULL;
}

/* Opens the run's tables and checks that each is what its role says. */
static int open_tables(mcdc_apply *a, mcdc_error *err) {
    const mcdc_storage_env *env = a->ctx.storage_env;
    const char *wh = a->cfg.warehouse;
    /* one table in two roles, or one inside another */
    const mcdc_role roles[4] = {{"--bronze", a->cfg.bronze, true},
                                {"--target", a->cfg.target, true},
                                {"--control-table", a->cfg.control_table, true},
                                {"--facts-table", a->cfg.facts_table, true}};
    int rc = mcdc_roles_check(roles, 4, wh, NULL, err);
    if (rc == MCDC_OK) rc = mcdc_table_open_env(&a->bronze, env, a->cfg.bronze, wh, err);
    if (rc == MCDC_OK) rc = mcdc_table_open_env(&a->silver, env, a->cfg.target, wh, err);
    if (rc == MCDC_OK) rc = mcdc_table_open_env(&a->control, env, a->cfg.control_table, wh, err);
    if (rc == MCDC_OK && a->cfg.facts_table)
        rc = mcdc_table_open_env(&a->facts, env, a->cfg.facts_table, wh, err);
    if (rc == MCDC_OK) rc = mcdc_plans_name(&a->plans_name, a->cfg.bronze, err);
    if (rc == MCDC_OK) rc = mcdc_table_open_env(&a->plans, env, a->plans_name, wh, err);
    if (rc == MCDC_OK) rc = mcdc_table_check_kind(a->bronze, MCDC_KIND_BRONZE, "bronze", err);
    if (rc == MCDC_OK) rc = mcdc_table_check_kind(a->silver, MCDC_KIND_SILVER, "target", err);
    if (rc == MCDC_OK) rc = mcdc_table_check_kind(a->control, MCDC_KIND_CONTROL, "control table", err);
    if (rc == MCDC_OK && a->facts) rc = mcdc_table_check_kind(a->facts, MCDC_KIND_FACTS, "facts table", err);
    return rc;
}

/* The key columns and the table's capture instances, from SQL Server when
 * the source options allow. */
static int resolve_source(mcdc_apply *a, mcdc_error *err) {
    int rc = list_add(&a->ours, &a->n_ours, a->cfg.capture_instance, strlen(a->cfg.capture_instance), err);
    if (rc || a->opts == NULL) return rc;
    /* the configured instance, else (gone) its table through bronze's names */
    silver_instances names;
    rc = silver_source_open_bronze(&a->changes, a->opts, a->bronze, a->cfg.bronze, "apply", &names,
                                   err);
    silver_instances_free(&names);
    if (rc == MCDC_E_MISMATCH) return rc;
    if (rc) return mcdc_error_wrap(err, "reading the capture instance's key and its table's capture "
                                        "instances"), rc;
    if (a->n_keys > 0) return MCDC_OK;
    int n = 0;
    const char *const *k = mcdc_changes_index_keys(a->changes, &n);
    if (n == 0)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "%s has no unique index to key rows by: pass --keys",
                              mcdc_changes_capture_instance(a->changes));
    if (n > SILVER_KEYS_MAX) return mcdc_error_set(err, MCDC_E_LIMIT, "an index of %d columns", n);
    a->keys = mcdc_calloc((size_t)n, sizeof *a->keys);
    if (a->keys == NULL) return nomem(err);
    for (int i = 0; i < n; i++) {
        if ((a->keys[i] = mcdc_strdup(k[i])) == NULL) return nomem(err);
        a->n_keys = i + 1;
    }
    return MCDC_OK;
}

int mcdc_apply_run(mcdc_apply *a, mcdc_apply_fn fn, void *ctx, mcdc_apply_result *result,
                   mcdc_error *err) {
    if (a == NULL || result == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_apply_run: a NULL argument");
    const mcdc_log_sink *host = mcdc_log_use(&a->sink);
    memset(&a->res, 0, sizeof a->res);
    a->res.silver_version = -1;
    a->res.snapshot_wave = -1;
    a->fn = fn;
    a->fn_ctx = ctx;
    a->fresh_passes = 0;
    a->mem_unit = -1;
    a->has_fin = false;
    int rc = open_tables(a, err);
    if (rc == MCDC_OK) rc = resolve_source(a, err);
    if (rc == MCDC_OK && a->facts == NULL && !a->warned_no_facts) {
        a->warned_no_facts = true;
        mcdc_log(MCDC_LOG_WARN, "apply into %s without a facts table: its finalized_until is not "
                                "advanced, and a chunked snapshot cannot be applied (pass the "
                                "stream's --facts-table)",
                 a->cfg.target);
    }
    if (rc == MCDC_OK) empty_spill(a); /* runs a killed pass left */
    if (rc == MCDC_OK) {
        mcdc_ledger led = {&APPLY_LEDGER, a};
        bool until_idle = a->cfg.trigger == MCDC_TRIGGER_ONCE || a->cfg.trigger == MCDC_TRIGGER_AVAILABLE_NOW;
        mcdc_frame_cfg fc = {
            .ctx = &a->ctx,
            .ledger = &led,
            .target = a->silver,
            .app_id = APPLY_APP_ID,
            .control_table = a->cfg.control_table,
            .warehouse = a->cfg.warehouse,
            .verdict_name = a->cfg.target,
            .granularity = a->cfg.granularity,
            .stop_when_idle = until_idle,
            .idle_poll_ms = a->cfg.trigger == MCDC_TRIGGER_PROCESSING_TIME ? a->cfg.processing_time_ms : 1000,
            .min_interval_ms = a->cfg.trigger == MCDC_TRIGGER_PROCESSING_TIME ? a->cfg.processing_time_ms : 0,
            .max_units = a->cfg.max_passes,
        };
        rc = mcdc_frame_run(&fc, &APPLY_OPS, a, err);
    }
    if (rc == MCDC_OK) {
        a->res.has_finalized_until = a->has_fin;
        a->res.finalized_until_us = a->fin_us;
        int64_t ver;
        if (mcdc_table_version(a->silver, &ver, NULL) == MCDC_OK) a->res.silver_version = ver;
    }
    *result = a->res;
    if (rc && rc != MCDC_E_CANCELLED) mcdc_error_wrap(err, "apply into %s", a->cfg.target);
    close_run(a);
    mcdc_log_use(host);
    return rc;
}

void mcdc_apply_free(mcdc_apply *a) {
    if (a == NULL) return;
    close_run(a);
    for (int i = 0; i < a->n_strings; i++) mcdc_free(a->strings[i]);
    mcdc_free(a->strings);
    for (int32_t k = 0; k < a->n_keys; k++) mcdc_free(a->keys[k]);
    mcdc_free(a->keys);
    for (int32_t k = 0; k < a->n_track; k++) mcdc_free(a->track[k]);
    mcdc_free(a->track);
    mcdc_free(a);
}

int mcdc_apply_result_json(char *out, size_t cap, const mcdc_apply_result *r, mcdc_error *err) {
    if (out == NULL || r == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_apply_result_json: a NULL argument");
    char fin[MCDC_TS_TEXT_SIZE + 2] = "null";
    if (r->has_finalized_until) {
        char t[MCDC_TS_TEXT_SIZE];
        if (mcdc_ts_format(t, sizeof t, r->finalized_until_us, 3, NULL) == MCDC_OK)
            snprintf(fin, sizeof fin, "\"%s\"", t);
    }
    char lsn[32] = "null", open[32] = "null", wave[32] = "null";
    if (r->has_applied_lsn) snprintf(lsn, sizeof lsn, "\"%.22s\"", r->applied_lsn);
    if (r->has_open_snapshot) snprintf(open, sizeof open, "\"%.22s\"", r->open_snapshot_lsn);
    if (r->snapshot_wave >= 0) snprintf(wave, sizeof wave, "%lld", (long long)r->snapshot_wave);
    int n = snprintf(out, cap,
                     "{\"rebuilt\":%s,\"applied_lsn\":%s,\"finalized_until\":%s,\"bronze_found\":%s,"
                     "\"passes\":%lld,\"inserted\":%lld,\"updated\":%lld,\"deleted\":%lld,"
                     "\"silver_version\":%lld,\"open_snapshot_lsn\":%s,\"snapshot_wave\":%s}",
                     r->rebuilt ? "true" : "false", lsn, fin, r->bronze_found ? "true" : "false",
                     (long long)r->passes, (long long)r->inserted, (long long)r->updated,
                     (long long)r->deleted, (long long)r->silver_version, open, wave);
    if (n < 0 || (size_t)n >= cap)
        return mcdc_error_set(err, MCDC_E_LIMIT, "%zu bytes are too few for the ApplyResult", cap);
    return MCDC_OK;
}
