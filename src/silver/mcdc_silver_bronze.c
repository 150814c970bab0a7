/*
 * mcdc_silver_bronze.c - what apply reads of bronze (mcdc_silver_apply.h):
 * its own columns checked, the change rows' schema, whose capture instance
 * a row is of, and the two passes over one pinned version of it:
 *   pass 1  the newest whole snapshot after the one silver was rebuilt from
 *           (files of one snapshot's rows alone are known by their
 *           statistics; only the others are read, their snapshot rows)
 *   pass 2  the rows the pass ranks, with their tags, into a sorter: the
 *           changes past silver's position (or a rebuild's snapshot and the
 *           changes after it), the rows of new chunks, the repairs recorded
 *           since the last pass, and the later changes of their keys
 * A row's LSN is compared as the project's LSN, parsed once per distinct
 * text (a commit's rows share one).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_fanin.h"
#include "mcdc_silver_apply.h"

/* Bronze's own columns: none goes to silver but _start_lsn and _commit_ts. */
static const char *const BRONZE_META[] = {"_capture_instance", "_start_lsn", "_seqval", "_operation",
                                          "_command_id", "_commit_ts", "_batch_id", "_snapshot",
                                          "_chunk", NULL};

static bool is_meta(const char *name) {
    for (int i = 0; BRONZE_META[i]; i++)
        if (strcmp(BRONZE_META[i], name) == 0) return true;
    return false;
}

/* ---- bronze's columns ------------------------------------------------------------------ */

int apply_change_schema(mcdc_schema **out, const mcdc_schema *bs, int32_t *n_cap, mcdc_error *err) {
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

int apply_check_bronze_types(const mcdc_apply *a, const mcdc_schema *bs, mcdc_error *err) {
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

/* ---- capture instances ------------------------------------------------------------ */

static bool in_list(char **v, int32_t n, const char *p, size_t len) {
    for (int32_t i = 0; i < n; i++)
        if (strlen(v[i]) == len && mcdc_str_nieq(v[i], p, len)) return true;
    return false;
}

int apply_list_add(char ***v, int32_t *n, const char *p, size_t len, mcdc_error *err) {
    char **x = mcdc_realloc(*v, (size_t)(*n + 1) * sizeof *x);
    if (x == NULL) return apply_nomem(err);
    *v = x;
    if ((x[*n] = mcdc_strndup(p, len)) == NULL) return apply_nomem(err);
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
        if (name == NULL) return apply_nomem(err);
        rc = mcdc_changes_is_table_instance(a->changes, name, false, &yes, err);
        mcdc_free(name);
    }
    if (rc) return rc;
    *ours = yes;
    return yes ? apply_list_add(&a->ours, &a->n_ours, p, len, err)
               : apply_list_add(&a->others, &a->n_others, p, len, err);
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

static inline bool text_at(const mcdc_column *c, int64_t r, const char **p, size_t *n) {
    if (c == NULL || !mcdc_col_is_valid(c, r)) return false;
    *p = (const char *)c->data + c->offsets[r];
    *n = (size_t)(c->offsets[r + 1] - c->offsets[r]);
    return true;
}

static inline bool i32_at(const mcdc_column *c, int64_t r, int32_t *v) {
    if (c == NULL || !mcdc_col_is_valid(c, r)) return false;
    memcpy(v, c->values + r * 4, 4);
    return true;
}

/* A row's LSN text as the project's LSN, parsed once per distinct text: a
 * commit's rows (a snapshot's, all of them) share one. */
typedef struct lsn_memo {
    char text[MCDC_LSN_TEXT_LEN];
    mcdc_lsn v;
    bool ok;
} lsn_memo;

/* The LSN of text (n bytes) in *out, parsed (row_lsn's other case). */
static int row_lsn_parse(lsn_memo *m, const char *p, size_t n, const char *column, mcdc_lsn *out,
                         mcdc_error *err) {
    apply_lsn x = apply_lsn_of(p, n);
    if (!x.set)
        return mcdc_error_set(err, MCDC_E_CORRUPT,
                              "bronze row with %s '%.*s', which is not an LSN (0x and 20 hex "
                              "digits): is this table a bronze table of mssql-cdc?",
                              column, (int)(n > 40 ? 40 : n), p);
    memcpy(m->text, p, MCDC_LSN_TEXT_LEN);
    m->v = x.v;
    m->ok = true;
    *out = x.v;
    return MCDC_OK;
}

/* The LSN of text (n bytes) in *out; MCDC_E_CORRUPT naming column when it
 * is not one ("0x" and 20 hex digits, as bronze stores them). */
static inline int row_lsn(lsn_memo *m, const char *p, size_t n, const char *column, mcdc_lsn *out,
                          mcdc_error *err) {
    if (m->ok && n == MCDC_LSN_TEXT_LEN && silver_lsn_text_eq(p, m->text)) {
        *out = m->v;
        return MCDC_OK;
    }
    return row_lsn_parse(m, p, n, column, out, err);
}

_Static_assert(MCDC_LSN_TEXT_LEN == 22 && MCDC_LSN_BYTES == 10, "silver_lsn_text_eq, silver_lsn10_cmp");
/* A row's LSN against a bound (none: every LSN is above it). */
static inline int vs(const mcdc_lsn *row, const apply_lsn *bound) {
    return bound->set ? silver_lsn10_cmp(row->b, bound->v.b) : 1;
}

/* ---- pass 1: the newest whole snapshot ---------------------------------------------- */

typedef struct pass1 {
    mcdc_apply *a;
    apply_lsn after;  /* rows at or below it are of snapshots already rebuilt from */
    bronze_snapshots *out;
    bool skip_chunk_files;
    int32_t c_ci, c_op, c_lsn, c_snap, c_chunk;
    lsn_memo m_lsn, m_snap;
    int rc;           /* an error deciding on statistics */
    mcdc_error *err;
} pass1;

/* minValues / maxValues / nullCount of column in a file's statistics. */
static json_t *stat_of(json_t *stats, const char *group, const mcdc_table_view *v,
                       const char *column) {
    const char *name = mcdc_table_view_stats_name(v, column);
    return name ? json_object_get(json_object_get(stats, group), name) : NULL;
}

/* A statistic that is exact: a string shorter than Delta's 32-character
 * prefix, or an integer. */
static const char *exact_text(json_t *j) {
    const char *s = json_string_value(j);
    return s && strlen(s) < 32 ? s : NULL;
}

/* Pass 1 reads snapshot rows only: a file whose smallest operation is
 * above 0 holds none, and (once the facts say which chunks arrived) one of
 * chunk rows alone is not a whole snapshot's. A file of one whole
 * snapshot's rows alone (operation 0 only, no chunk, one capture instance
 * of ours, one snapshot LSN) is known by its statistics: it is not read. */
static bool snapshot_files(void *ctx, const mcdc_table_view *v, const mcdc_table_file *f) {
    pass1 *p = ctx;
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
    if (read && p->skip_chunk_files && json_is_integer(nulls) && json_integer_value(nulls) == 0 &&
        json_is_integer(rows) && json_integer_value(rows) > 0)
        read = false;
    /* one whole snapshot's rows: the statistics tell its LSN */
    const char *ci_lo = exact_text(stat_of(j, "minValues", v, "_capture_instance"));
    const char *ci_hi = exact_text(stat_of(j, "maxValues", v, "_capture_instance"));
    const char *sn_lo = exact_text(stat_of(j, "minValues", v, "_snapshot"));
    const char *sn_hi = exact_text(stat_of(j, "maxValues", v, "_snapshot"));
    json_t *sn_nulls = stat_of(j, "nullCount", v, "_snapshot");
    const char *ls_lo = exact_text(stat_of(j, "minValues", v, "_start_lsn"));
    apply_lsn sn = sn_lo ? apply_lsn_of(sn_lo, strlen(sn_lo)) : (apply_lsn){0};
    apply_lsn ls = ls_lo ? apply_lsn_of(ls_lo, strlen(ls_lo)) : (apply_lsn){0};
    if (read && json_is_integer(op) && json_integer_value(op) == 0 && json_is_integer(op_max) &&
        json_integer_value(op_max) == 0 && no_chunks && ci_lo && ci_hi && strcmp(ci_lo, ci_hi) == 0 &&
        sn.set && strcmp(sn_lo, sn_hi) == 0 && json_is_integer(sn_nulls) &&
        json_integer_value(sn_nulls) == 0 && ls.set && apply_lsn_cmp(&ls, &p->after) > 0) {
        bool ours = false;
        p->rc = instance_ours(p->a, ci_lo, strlen(ci_lo), &ours, p->err);
        if (p->rc == MCDC_OK && ours) {
            apply_lsn_max(&p->out->whole, &sn);
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
        mcdc_lsn at;
        if ((rc = row_lsn(&p->m_lsn, l, ln, "_start_lsn", &at, err)) != MCDC_OK) break;
        if (p->after.set && mcdc_lsn_cmp(&at, &p->after.v) <= 0) continue;
        bool ours = false;
        if (text_at(ci, r, &c, &cn)) rc = instance_ours(p->a, c, cn, &ours, err);
        if (rc || !ours) continue;
        if (chunk && mcdc_col_is_valid(chunk, r)) {
            p->out->chunk_rows = true;
            continue;
        }
        apply_lsn seen = {true, at};
        if (text_at(snap, r, &s, &sn)) rc = row_lsn(&p->m_snap, s, sn, "_snapshot", &seen.v, err);
        if (rc == MCDC_OK) apply_lsn_max(&p->out->whole, &seen);
    }
    mcdc_batch_free(b);
    return rc;
}

int apply_bronze_snapshots(mcdc_apply *a, const apply_plan *pl, const mcdc_schema *bs,
                           const apply_lsn *after, bool skip_chunk_files, bronze_snapshots *out,
                           mcdc_error *err) {
    memset(out, 0, sizeof *out);
    pass1 p = {.a = a, .after = *after, .out = out, .skip_chunk_files = skip_chunk_files, .err = err};
    const char *cols[5] = {"_capture_instance", "_operation", "_start_lsn"};
    int32_t nc = 3;
    p.c_ci = 0, p.c_op = 1, p.c_lsn = 2, p.c_snap = p.c_chunk = -1;
    if (mcdc_schema_find(bs, "_snapshot") >= 0) p.c_snap = nc, cols[nc++] = "_snapshot";
    if (mcdc_schema_find(bs, "_chunk") >= 0) p.c_chunk = nc, cols[nc++] = "_chunk";
    mcdc_table_scan sc = MCDC_TABLE_SCAN_INIT;
    sc.version = pl->bronze_version;
    sc.columns = cols;
    sc.n_columns = nc;
    apply_lsn lo = apply_lsn_next(after); /* rows after the one rebuilt from */
    char lo_text[MCDC_LSN_TEXT_LEN + 1];
    if (lo.set) {
        apply_lsn_text(&lo, lo_text);
        sc.prune_column = "_start_lsn";
        sc.lo = (mcdc_scan_bound){true, lo_text, 0};
    }
    sc.file_fn = snapshot_files;
    sc.file_ctx = &p;
    int64_t vr;
    int rc = mcdc_table_scan_run(a->bronze, &sc, pass1_rows, &p, &vr, NULL, err);
    return rc ? rc : p.rc;
}

/* ---- pass 2: the rows to rank, into the sorter ------------------------------------- */

typedef struct pass2 {
    mcdc_apply *a;
    apply_plan *pl;
    const bronze_selection *sel;
    bronze_ranked *out;
    char snapshot_text[MCDC_LSN_TEXT_LEN + 1]; /* a history's rebuild: its snapshot rows' new LSN */
    lsn_memo m_lsn, m_snap;
    /* columns of the scan */
    int32_t n_cap, c_lsn, c_ts, c_op, c_seq, c_ci, c_cmd, c_snap, c_chunk;
    int32_t *idx;               /* rows picked of the batch, and their tags */
    uint32_t *tags;
    uint8_t *is_rep;            /* per row picked: a repair row (its rank columns rewritten) */
    int64_t cap;
    int32_t *from;              /* the change rows' columns in a scanned batch */
    int32_t key_cols[SILVER_KEYS_MAX]; /* the key's columns in a scanned batch */
    int32_t n_keys;
    mcdc_buf k1, k2;
    /* the last capture instance seen and whether it is ours: a bronze's
     * rows mostly share one */
    char ci_last[64];
    size_t ci_len;
    bool ci_ours;
    /* progress: the rows the scan's files hold, told as the phase's total
     * once the first batch comes (an idle pass reads none: no phase) */
    mcdc_progress_tracker *progress;
    mcdc_scan_rows files;
    bool pruned, told;
} pass2;

/* memcmp(a, b, n) == 0 for the short texts of a row's columns, a word at
 * a time (the last word overlapping the one before) and no call. */
static inline bool same_bytes(const char *a, const char *b, size_t n) {
    if (n < 8) {
        unsigned d = 0;
        for (size_t i = 0; i < n; i++) d |= (unsigned)(a[i] ^ b[i]);
        return d == 0;
    }
    uint64_t x, y, d = 0;
    for (size_t i = 0; i + 8 <= n; i += 8) {
        memcpy(&x, a + i, 8), memcpy(&y, b + i, 8);
        d |= x ^ y;
    }
    memcpy(&x, a + n - 8, 8), memcpy(&y, b + n - 8, 8);
    return (d | (x ^ y)) == 0;
}

static int row_instance(pass2 *p, const char *c, size_t n, bool *ours, mcdc_error *err) {
    if (p->ci_len > 0 && n == p->ci_len && same_bytes(c, p->ci_last, n)) {
        *ours = p->ci_ours;
        return MCDC_OK;
    }
    int rc = instance_ours(p->a, c, n, ours, err);
    if (rc == MCDC_OK && n > 0 && n <= sizeof p->ci_last) {
        memcpy(p->ci_last, c, n);
        p->ci_len = n;
        p->ci_ours = *ours;
    }
    return rc;
}

static bool is_new_chunk(const pass2 *p, int64_t c) {
    int32_t lo = 0, hi = p->sel->n_new;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (p->sel->new_chunks[mid] == c) return true;
        if (p->sel->new_chunks[mid] < c) lo = mid + 1;
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
    for (int32_t i = 0; i < p->sel->n_rep; i++)
        if (ln == MCDC_LSN_TEXT_LEN && memcmp(p->sel->rep_stamps[i], l, MCDC_LSN_TEXT_LEN) == 0)
            return true;
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

/* Room for the picks of a batch of rows rows. */
static int pick_room(pass2 *p, int64_t rows, mcdc_error *err) {
    if (rows <= p->cap) return MCDC_OK;
    mcdc_free(p->idx);
    mcdc_free(p->tags);
    mcdc_free(p->is_rep);
    p->idx = mcdc_calloc((size_t)rows, sizeof *p->idx);
    p->tags = mcdc_calloc((size_t)rows, sizeof *p->tags);
    p->is_rep = mcdc_calloc((size_t)rows, sizeof *p->is_rep);
    p->cap = p->idx && p->tags && p->is_rep ? rows : 0;
    return p->cap == 0 ? apply_nomem(err) : MCDC_OK;
}

/* A history's rebuild notes the commit times around its snapshot: the rows
 * applied, so the choice is deterministic. */
static void note_times(pass2 *p, const mcdc_batch *b, int64_t r, const mcdc_lsn *at, bool change) {
    const mcdc_column *tc = &b->columns[p->c_ts];
    if (!mcdc_col_is_valid(tc, r)) return;
    bronze_ranked *o = p->out;
    int64_t t;
    memcpy(&t, tc->values + r * 8, 8);
    int side = vs(at, &p->sel->snapshot);
    if (!change && !o->has_ts_snap) o->has_ts_snap = true, o->ts_snap = t;
    if (change && side <= 0 && (!o->has_ts_le || t > o->ts_le)) o->has_ts_le = true, o->ts_le = t;
    if (change && side > 0 && (!o->has_ts_gt || t < o->ts_gt)) o->has_ts_gt = true, o->ts_gt = t;
}

/* The scan's rows, a batch at a time (before pass2_rows takes it). */
static void pass2_progress(pass2 *p, const mcdc_batch *b) {
    if (p->progress == NULL) return;
    if (!p->told) {
        p->told = true;
        mcdc_progress_phase(p->progress, "reading bronze", NULL, -1,
                            p->files.unknown ? -1 : p->files.rows, p->pruned);
    }
    mcdc_progress_add(p->progress, b->rows, mcdc_batch_bytes(b));
}

/* The rows of b (taken) the pass ranks, as change rows, in *out (NULL:
 * none), their tags in p->tags. */
static int pass2_pick(pass2 *p, mcdc_batch *b, mcdc_batch **out, mcdc_error *err) {
    *out = NULL;
    const bronze_selection *sel = p->sel;
    const mcdc_column *lsn = &b->columns[p->c_lsn], *op = &b->columns[p->c_op],
                      *ci = &b->columns[p->c_ci];
    const mcdc_column *snap = p->c_snap >= 0 ? &b->columns[p->c_snap] : NULL;
    const mcdc_column *chunk = p->c_chunk >= 0 ? &b->columns[p->c_chunk] : NULL;
    const mcdc_column *seqc = &b->columns[p->c_seq];
    int64_t n = 0;
    bool any_rep = false;
    int rc = pick_room(p, b->rows, err);
    for (int64_t r = 0; r < b->rows && rc == MCDC_OK; r++) {
        int32_t o;
        const char *l, *c = NULL, *s;
        size_t ln, cn = 0, sn;
        if (!i32_at(op, r, &o) || !text_at(lsn, r, &l, &ln)) continue;
        mcdc_lsn at, sat = {{0}};
        if ((rc = row_lsn(&p->m_lsn, l, ln, "_start_lsn", &at, err)) != MCDC_OK) break;
        bool has_snap = text_at(snap, r, &s, &sn);
        if (has_snap && (rc = row_lsn(&p->m_snap, s, sn, "_snapshot", &sat, err)) != MCDC_OK) break;
        if (!has_snap) sat = at;
        bool change = o != 0;
        bool base;
        if (sel->rebuild && sel->snapshot.set) {
            base = change ? vs(&at, &sel->changes_after) > 0 : vs(&sat, &sel->snapshot) == 0;
        } else if (sel->rebuild || !sel->applied.set) {
            base = change;
        } else {
            base = change && vs(&at, &sel->applied) > 0;
        }
        if (sel->history && base) note_times(p, b, r, &at, change);
        bool wave = false, later = false;
        if (sel->n_new > 0) {
            int32_t ch;
            if (!change && has_snap && vs(&sat, &sel->s_open) == 0 && i32_at(chunk, r, &ch) &&
                is_new_chunk(p, ch) && vs(&at, &sel->first) >= 0)
                wave = true;
            later = change && vs(&at, &sel->s_open) > 0 && vs(&at, &sel->first) >= 0;
        }
        /* a repair row: a change operation without a seqval */
        bool repair_row = change && o != 3 && !mcdc_col_is_valid(seqc, r);
        bool rep = false;
        if (sel->n_rep > 0) {
            rep = repair_row && new_repair_stamp(p, l, ln);
            later = later || (change && vs(&at, &sel->rep_min) > 0);
        }
        if (!base && !wave && !later && !rep) continue;
        bool ours = false;
        if (text_at(ci, r, &c, &cn)) rc = row_instance(p, c, cn, &ours, err);
        if (rc) break;
        if (!ours) {
            if (base || wave || rep) rc = other_instance(p->a, c, cn, err);
            continue;
        }
        p->out->repair_rows += rep;
        if (base && change && vs(&at, &p->out->top) > 0) p->out->top = (apply_lsn){true, at};
        if (o == 3 && r + 1 < b->rows && outranked_before_image(p, b, r)) continue;
        bool at_stamp = sel->keep_stamps && wave && in_range(p, b, r);
        if (sel->history && !change && base && sel->snapshot.set && !at_stamp) {
            /* a history ranks a rebuild's snapshot rows (a chunk's, stamped
             * later) at the snapshot's LSN, before every change after it:
             * a key's first row then tells whether the snapshot holds it.
             * A chunk applied as a wave tells it at its stamp, for the keys
             * of its range */
            memcpy(lsn->data + lsn->offsets[r], p->snapshot_text, MCDC_LSN_TEXT_LEN);
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
    if (rc == MCDC_OK && n == b->rows && n > 0 && !any_rep)
        return mcdc_batch_reshape(out, b, p->pl->change_schema, p->from, err); /* takes b */
    mcdc_batch *ch = NULL;
    if (rc == MCDC_OK && n > 0) rc = mcdc_batch_create(&ch, p->pl->change_schema, n, err);
    for (int32_t c = 0; rc == MCDC_OK && n > 0 && c < k + 3; c++)
        rc = p->from[c] >= 0 ? mcdc_col_take(&ch->columns[c], &b->columns[p->from[c]], p->idx, n, err)
                             : mcdc_col_append_nulls(&ch->columns[c], n, err);
    if (rc == MCDC_OK && n > 0 && any_rep) {
        rc = rank_columns(p, b, &ch->columns[k + 3], &ch->columns[k + 4], n, err);
    } else if (rc == MCDC_OK && n > 0) {
        rc = p->c_cmd >= 0 ? mcdc_col_take(&ch->columns[k + 3], &b->columns[p->c_cmd], p->idx, n, err)
                           : mcdc_col_append_nulls(&ch->columns[k + 3], n, err);
        if (rc == MCDC_OK) rc = mcdc_col_take(&ch->columns[k + 4], &b->columns[p->c_seq], p->idx, n, err);
    }
    if (rc == MCDC_OK && n > 0) rc = mcdc_batch_seal(ch, err);
    mcdc_batch_free(b);
    if (rc == MCDC_OK) *out = ch;
    else mcdc_batch_free(ch);
    return rc;
}

static int pass2_rows(void *ctx, mcdc_batch *b, mcdc_error *err) {
    pass2 *p = ctx;
    pass2_progress(p, b);
    mcdc_batch *ch = NULL;
    int rc = pass2_pick(p, b, &ch, err);
    if (rc == MCDC_OK && ch) rc = silver_sorter_add_owned(p->pl->changes, ch, p->tags, err);
    return rc;
}

/* ---- pass 2 read again: a rebuild's rows in key order ----------------------------
 * A rebuild's rows mostly come in key order already: a snapshot reads the
 * table in key order, and its files' key ranges follow one another. Then
 * pass 2 reads only the key and bronze's own columns, and the sorter checks
 * the order and holds nothing; the merge reads the rows again here, whole
 * (silver_sorter_set_replay): the same version, columns, bounds and picks.
 * Whether the rows are in order the sorter checks row by row; the files'
 * statistics only decide whether to try (files whose key ranges overlap
 * would break the order, and cost a read for nothing).
 * The second read runs a scan on a thread of its own (its decoder on
 * another, as every scan's), queuing bronze's batches for the merge, which
 * picks the rows of each as pass 2 did: reading overlaps the merge and
 * silver's writing on the two cores. */

/* Bronze's batches the replay's thread queues ahead of the merge: one (each
 * is held whole, every column, until the merge is done with it). */
#define REPLAY_AHEAD 1

typedef struct bronze_replay {
    pass2 p;                  /* its own: what the first read saw is not counted twice */
    bronze_selection sel;
    bronze_ranked scratch;
    mcdc_table *t;
    mcdc_table_scan sc;
    const char **cols;        /* sc's columns (the plan's schema's names, literals) */
    char lo_text[MCDC_LSN_TEXT_LEN + 1];
    mcdc_fanin *fan;          /* the scan, its one producer; NULL: none running */
    bool ended;               /* the scan ended (rc, err), fan finished */
    int rc;
    mcdc_error err;
} bronze_replay;

static void replay_stop(bronze_replay *x) {
    mcdc_fanin_finish(x->fan, NULL, NULL);
    x->fan = NULL;
}

void apply_bronze_replay_free(bronze_replay *x) {
    if (x == NULL) return;
    replay_stop(x);
    mcdc_free(x->cols);
    mcdc_free(x->p.idx);
    mcdc_free(x->p.tags);
    mcdc_free(x->p.is_rep);
    mcdc_free(x->p.from);
    mcdc_buf_free(&x->p.k1);
    mcdc_buf_free(&x->p.k2);
    mcdc_free(x);
}

/* The fanin's producer, on the replay's thread: the scan, of the version
 * pass 2 read (a version gone meanwhile is MCDC_E_CORRUPT). */
static int replay_scan(void *arg, mcdc_batch_fn put, void *put_ctx, mcdc_error *err) {
    bronze_replay *x = arg;
    int64_t vr = -1;
    int rc = mcdc_table_scan_run(x->t, &x->sc, put, put_ctx, &vr, NULL, err);
    if (rc == MCDC_OK && vr != x->sc.version)
        rc = mcdc_error_set(err, MCDC_E_CORRUPT, "bronze %s version %lld is gone while it is read",
                            x->p.a->cfg.bronze, (long long)x->sc.version);
    return rc;
}

/* silver_replay_fn: pass 2's picks of bronze again, batch by batch. */
static int replay_next(void *ctx, bool restart, mcdc_batch **out, const uint32_t **tags,
                       mcdc_error *err) {
    bronze_replay *x = ctx;
    *out = NULL;
    *tags = NULL;
    if (restart || (x->fan == NULL && !x->ended)) {
        replay_stop(x);
        x->ended = false;
        void *arg = x;
        int rc = mcdc_fanin_start(&x->fan, 1, REPLAY_AHEAD, replay_scan, &arg, err);
        if (rc) {
            replay_stop(x);
            return rc;
        }
    }
    for (;;) {
        if (x->ended) { /* the end, or the scan's error */
            if (x->rc) *err = x->err;
            return x->rc;
        }
        mcdc_batch *b = mcdc_fanin_next(x->fan);
        if (b == NULL) {
            x->rc = mcdc_fanin_finish(x->fan, NULL, &x->err);
            x->fan = NULL;
            x->ended = true;
            continue;
        }
        mcdc_batch *ch = NULL;
        int rc = pass2_pick(&x->p, b, &ch, err);
        if (rc) return rc;
        if (ch) {
            *out = ch;
            *tags = x->p.tags;
            return MCDC_OK;
        }
    }
}

/* A file's key range by its statistics. */
typedef struct {
    json_int_t lo, hi;
} key_span;

static int span_cmp(const void *pa, const void *pb) {
    const key_span *a = pa, *b = pb;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* Do the key ranges of the files of bronze's version (by their statistics)
 * follow one another, apart, once the files are ordered by their smallest
 * key (the order both reads take: mcdc_table_scan.order_column)? Only then
 * is the replay tried: rows out of order would cost a second read. A
 * snapshot on several connections writes each reader's rows into files of
 * their own (mcdc_snapshot_job.c), whose ranges interleave in the view's
 * order. key: one integer column. */
static int keys_ascend(mcdc_apply *a, const apply_plan *pl, const char *key, bool *yes, mcdc_error *err) {
    *yes = false;
    mcdc_table_view *v = NULL;
    int rc = mcdc_table_view_open(&v, a->bronze, pl->bronze_version, err);
    if (rc || v == NULL) return rc;
    size_t n = mcdc_table_view_file_count(v);
    key_span *sp = n ? mcdc_malloc(n * sizeof *sp) : NULL;
    bool ok = n > 0 && sp;
    if (n && sp == NULL) rc = apply_nomem(err);
    for (size_t i = 0; ok && i < n; i++) {
        mcdc_table_file f = mcdc_table_view_file(v, i);
        json_error_t je;
        json_t *j = f.stats_json ? json_loads(f.stats_json, 0, &je) : NULL;
        json_t *lo = stat_of(j, "minValues", v, key), *hi = stat_of(j, "maxValues", v, key);
        ok = json_is_integer(lo) && json_is_integer(hi);
        if (ok) sp[i] = (key_span){json_integer_value(lo), json_integer_value(hi)};
        json_decref(j);
    }
    if (ok) qsort(sp, n, sizeof *sp, span_cmp);
    for (size_t i = 1; ok && i < n; i++) ok = sp[i].lo > sp[i - 1].hi;
    mcdc_free(sp);
    mcdc_table_view_free(v);
    *yes = ok;
    return rc;
}

/* The scan's columns: the captured ones first (at the change rows' places),
 * then bronze's own; p's column numbers set. cols holds n_cap + 8.
 * keys_only (a rebuild read twice, of no new chunk: rank_once): of the
 * captured ones the key's alone, and neither _chunk nor (but for a
 * history, whose commit times it notes) _commit_ts: they come null. */
static int32_t pass2_columns(pass2 *p, const apply_plan *pl, const mcdc_schema *bs,
                             const char **cols, const int32_t *keyc, int32_t n_keys, bool keys_only) {
    int32_t k = pl->n_cap, nc = 0;
    for (int32_t i = 0; i < k; i++) {
        bool want = !keys_only;
        for (int32_t j = 0; j < n_keys; j++) want = want || keyc[j] == i;
        p->from[i] = want ? nc : -1; /* keys_only: the others all null */
        if (want) cols[nc++] = pl->change_schema->fields[i].name;
    }
    p->n_cap = k;
    p->c_lsn = nc, cols[nc++] = "_start_lsn";
    p->c_ts = -1;
    if (!keys_only || p->sel->history) p->c_ts = nc, cols[nc++] = "_commit_ts";
    p->c_op = nc, cols[nc++] = "_operation";
    p->c_seq = nc, cols[nc++] = "_seqval";
    p->c_ci = nc, cols[nc++] = "_capture_instance";
    p->c_cmd = p->c_snap = p->c_chunk = -1;
    if (mcdc_schema_find(bs, "_command_id") >= 0) p->c_cmd = nc, cols[nc++] = "_command_id";
    if (mcdc_schema_find(bs, "_snapshot") >= 0) p->c_snap = nc, cols[nc++] = "_snapshot";
    /* _chunk tells new chunks' rows apart: without any, it is not read */
    if (!keys_only && p->sel->n_new > 0 && mcdc_schema_find(bs, "_chunk") >= 0) p->c_chunk = nc, cols[nc++] = "_chunk";
    MCDC_ASSERT(!keys_only || p->sel->n_new == 0);
    p->from[k] = p->c_lsn, p->from[k + 1] = p->c_ts, p->from[k + 2] = p->c_op;
    p->from[k + 3] = p->c_cmd, p->from[k + 4] = p->c_seq;
    p->n_keys = n_keys;
    for (int32_t j = 0; j < n_keys; j++) p->key_cols[j] = p->from[keyc[j]];
    return nc;
}

/* The oldest row wanted: past the position, a rebuild's snapshot, the
 * first new chunk's stamp, the oldest new repair; none: every row. */
static apply_lsn scan_floor(const bronze_selection *sel) {
    apply_lsn lo = {0};
    bool bounded = false;
    if (!sel->rebuild && sel->applied.set) lo = apply_lsn_next(&sel->applied), bounded = true;
    else if (sel->rebuild && sel->snapshot.set) lo = sel->snapshot, bounded = true;
    if (sel->rebuild && sel->snapshot.set && apply_lsn_cmp(&sel->changes_after, &sel->snapshot) < 0)
        lo = apply_lsn_next(&sel->changes_after);
    if (bounded && sel->n_new > 0 && apply_lsn_cmp(&sel->first, &lo) < 0) lo = sel->first;
    if (bounded && sel->n_rep > 0 && apply_lsn_cmp(&sel->rep_min, &lo) < 0) lo = sel->rep_min;
    if (!bounded) lo.set = false;
    return lo;
}

/* Pass 2 once: with x, the scan reads the key and bronze's own columns
 * only (the rows' other columns come null), for a sorter that checks them
 * and lets them go, to be read again whole through x. */
static int rank_once(mcdc_apply *a, apply_plan *pl, const mcdc_schema *bs, const bronze_selection *sel,
                     bronze_ranked *out, bronze_replay *x, mcdc_error *err) {
    memset(out, 0, sizeof *out);
    pass2 p = {.a = a, .pl = pl, .sel = sel, .out = out, .progress = a->ctx.progress};
    apply_lsn_text(&sel->snapshot, p.snapshot_text);
    int32_t k = pl->n_cap;
    const char **cols = mcdc_calloc((size_t)k + 9, sizeof *cols);
    p.from = mcdc_calloc((size_t)k + 5, sizeof *p.from);
    int rc = cols && p.from ? MCDC_OK : apply_nomem(err);
    int32_t keyc[SILVER_KEYS_MAX];
    for (int32_t i = 0; i < a->n_keys; i++) keyc[i] = mcdc_schema_find(pl->change_schema, a->keys[i]);
    int32_t nc = rc == MCDC_OK ? pass2_columns(&p, pl, bs, cols, keyc, a->n_keys, x != NULL) : 0;
    silver_sorter_cfg so = {.schema = pl->change_schema, .key_cols = keyc, .n_keys = a->n_keys,
                            .ranked = true, .history = a->cfg.scd_type == 2,
                            .lsn_col = k, .op_col = k + 2, .cmd_col = k + 3,
                            .seq_col = k + 4, .held_cols = k + 3, /* rank-only: dropped */
                            .keep_tags = SILVER_TAG_BASE | SILVER_TAG_WAVE | SILVER_TAG_REPAIR,
                            .unique_keys = true,
                            .memory_bytes = a->cfg.memory_mb * 1024 * 1024,
                            .spill = a->spill, .spill_prefix = a->spill_prefix};
    if (rc == MCDC_OK) rc = silver_sorter_create(&pl->changes, &so, err);
    mcdc_table_scan sc = MCDC_TABLE_SCAN_INIT;
    sc.version = pl->bronze_version;
    sc.columns = cols;
    sc.n_columns = nc;
    apply_lsn lo = scan_floor(sel);
    char lo_text[MCDC_LSN_TEXT_LEN + 1];
    if (lo.set) {
        apply_lsn_text(&lo, lo_text);
        sc.prune_column = "_start_lsn";
        sc.lo = (mcdc_scan_bound){true, lo_text, 0};
        p.pruned = true; /* row groups below lo are skipped: fewer rows than the files hold */
    }
    if (x) sc.order_column = pl->change_schema->fields[keyc[0]].name; /* keys_ascend's order */
    if (p.progress) {
        sc.file_fn = mcdc_scan_rows_fn;
        sc.file_ctx = &p.files;
    }
    if (x && rc == MCDC_OK) {
        /* the replay: a pass 2 of its own, every column, the same files and bounds */
        pl->replay = x;
        x->t = a->bronze;
        x->sel = *sel;
        x->p = (pass2){.a = a, .pl = pl, .sel = &x->sel, .out = &x->scratch};
        memcpy(x->p.snapshot_text, p.snapshot_text, sizeof x->p.snapshot_text);
        x->cols = mcdc_calloc((size_t)k + 9, sizeof *x->cols);
        x->p.from = mcdc_calloc((size_t)k + 5, sizeof *x->p.from);
        if (x->cols == NULL || x->p.from == NULL) rc = apply_nomem(err);
        x->sc = sc;
        if (rc == MCDC_OK) x->sc.n_columns = pass2_columns(&x->p, pl, bs, x->cols, keyc, a->n_keys, false);
        x->sc.columns = x->cols;
        x->sc.file_fn = NULL;
        x->sc.file_ctx = NULL;
        if (lo.set) {
            memcpy(x->lo_text, lo_text, sizeof x->lo_text);
            x->sc.lo.text = x->lo_text;
        }
        if (rc == MCDC_OK) silver_sorter_set_replay(pl->changes, replay_next, x);
    }
    int64_t vr;
    if (rc == MCDC_OK) rc = mcdc_table_scan_run(a->bronze, &sc, pass2_rows, &p, &vr, NULL, err);
    int64_t sorted = rc == MCDC_OK ? silver_sorter_rows(pl->changes) : 0;
    if (rc == MCDC_OK && p.told) mcdc_progress_phase(p.progress, "sorting", NULL, -1, sorted, false);
    if (rc == MCDC_OK) rc = silver_sorter_finish(pl->changes, err);
    if (rc == MCDC_OK && p.told) mcdc_progress_add(p.progress, sorted, 0);
    mcdc_free(cols);
    mcdc_free(p.idx);
    mcdc_free(p.tags);
    mcdc_free(p.is_rep);
    mcdc_free(p.from);
    mcdc_buf_free(&p.k1);
    mcdc_buf_free(&p.k2);
    return rc;
}

int apply_bronze_rank(mcdc_apply *a, apply_plan *pl, const mcdc_schema *bs,
                      const bronze_selection *sel, bronze_ranked *out, mcdc_error *err) {
    /* a rebuild of one integer key, of neither new chunks nor repairs, whose
     * files' key ranges ascend: its rows are read twice instead of sorted */
    const mcdc_field *kf = NULL;
    if (a->n_keys == 1) {
        int32_t kc = mcdc_schema_find(pl->change_schema, a->keys[0]);
        kf = kc >= 0 && kc < pl->n_cap ? &pl->change_schema->fields[kc] : NULL;
    }
    bool replay = false;
    int rc = MCDC_OK;
    if (kf && sel->rebuild && sel->n_new == 0 && sel->n_rep == 0 &&
        (kf->type == MCDC_TYPE_INT64 || kf->type == MCDC_TYPE_INT32 || kf->type == MCDC_TYPE_INT16 ||
         kf->type == MCDC_TYPE_INT8))
        rc = keys_ascend(a, pl, kf->name, &replay, err);
    bronze_replay *x = NULL;
    if (rc == MCDC_OK && replay && (x = mcdc_calloc(1, sizeof *x)) == NULL) rc = apply_nomem(err);
    if (rc == MCDC_OK) rc = rank_once(a, pl, bs, sel, out, x, err);
    if (rc == MCDC_E_CANCELLED && x && pl->changes && silver_sorter_replay_broken(pl->changes)) {
        /* the statistics said the keys ascend, the rows did not: sorted after all */
        mcdc_log(MCDC_LOG_INFO, "%s: rows out of key order though the files' key ranges ascend: "
                                "sorting them instead", a->cfg.bronze);
        silver_sorter_free(pl->changes);
        pl->changes = NULL;
        apply_bronze_replay_free(pl->replay);
        pl->replay = NULL;
        rc = rank_once(a, pl, bs, sel, out, NULL, err);
    } else if (x && pl->replay == NULL) {
        apply_bronze_replay_free(x); /* not handed over */
    }
    return rc;
}
