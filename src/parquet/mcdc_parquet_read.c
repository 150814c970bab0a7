/*
 * mcdc_parquet_read.c - the Parquet reader (formats.md B10).
 *
 * A column chunk is read page by page by a cursor: the page is decompressed,
 * its levels decoded, its non-null values decoded (any encoding) into a
 * physical form (fixed-width bytes, or offsets + bytes), then converted once
 * to the mcdc type (a "dense" one-column batch without nulls). Reading rows
 * spreads dense values over the definition levels into the output column.
 * Only the current row group's selected chunks are held in memory.
 */
#include <stdio.h>

#include "mcdc_parquet_int.h"

/* One page holds at most this many level entries (Arrow and parquet-mr
 * write 20k-row pages; 1 MiB of booleans is 8M). Bounds memory for lying
 * headers whose RLE levels claim billions of entries. */
#define PQ_PAGE_VALUES_MAX (1 << 24)
#define PQ_SCHEMA_DEPTH_MAX 64
#define PQ_CHUNK_BYTES_MAX ((int64_t)MCDC_BATCH_BYTES_MAX)
/* Opening reads this much of the file's end in one ranged read, so that the
 * footer usually comes with the trailer (one request, not two, on an object
 * store; writers' footers are a few KiB). */
#define PQ_TAIL_GUESS_BYTES (64 * 1024)

typedef struct pq_phys {
    int64_t n;
    mcdc_buf fixed;        /* n * width bytes (BOOLEAN: one byte per value) */
    int64_t *offs;         /* BYTE_ARRAY: n + 1 offsets into data */
    int64_t offs_cap;
    mcdc_buf data;
} pq_phys;

typedef struct pq_leafx {
    char *path;            /* owned */
    int32_t elem;
    int16_t max_def, max_rep;
    bool flat;             /* top-level, not repeated */
    int32_t phys;
    int32_t type_len;
    int32_t unit;          /* timestamps on INT64: PQ_UNIT_*; 0 otherwise */
    bool is_unsigned;      /* UINT_* on INT32/INT64: zero-extend */
    mcdc_schema *one;      /* one nullable field: the leaf */
    mcdc_parquet_leaf pub;
} pq_leafx;

typedef struct pq_cursor {
    mcdc_parquet_reader *r;
    const pq_leafx *lx;
    const pq_chunk_meta *cm;
    uint8_t *owned;
    size_t owned_cap;
    const uint8_t *chunk;
    size_t len, pos;
    uint8_t *page;
    size_t page_cap;
    pq_phys dict;
    bool has_dict;
    pq_phys ph;
    uint32_t *ibuf;
    int64_t ibuf_cap;
    mcdc_buf scratch;      /* int64 deltas, BSS */
    int16_t *def, *rep;
    int64_t lv_cap, lv_n, lv_pos;
    bool lv_dense;         /* every value of the page present: spread counts none */
    mcdc_batch *dense;
    int64_t dense_pos;
    mcdc_pq_codec_ctx dctx;
} pq_cursor;

typedef struct pq_filter {
    int32_t leaf;
    mcdc_parquet_op op;
    mcdc_parquet_value v;
    uint8_t *bytes;        /* owned copy of v.bytes */
} pq_filter;

struct mcdc_parquet_reader {
    char *name;            /* "<storage root>/<key>" or the open_mem name */
    mcdc_storage *st;      /* the file's storage (borrowed), NULL over memory */
    char *key;             /* owned */
    mcdc_storage *own_st;  /* the local storage of open_path, else NULL */
    const uint8_t *mem;
    uint8_t *own_mem;      /* a small file read whole at open (mem points at it) */
    int64_t file_len;
    uint8_t *footer;
    pq_file_meta meta;
    int32_t n_leaves;
    pq_leafx *leaves;
    mcdc_schema *flat;
    int32_t *flat_leaf;
    int32_t n_sel;
    int32_t *sel_leaf;
    mcdc_schema *sel_schema;
    bool *rg_skip;
    int32_t cur_rg;
    bool cursors_open;
    int64_t rg_left;
    pq_cursor *cursors;    /* n_sel */
    int64_t batch_rows;
    bool started;
    mcdc_batch *spare;     /* given back by _recycle, reused by _next */
};

/* ---- helpers ------------------------------------------------------------------- */

static void phys_free(pq_phys *p) {
    mcdc_buf_free(&p->fixed);
    mcdc_free(p->offs);
    mcdc_buf_free(&p->data);
    memset(p, 0, sizeof *p);
}

static int phys_reset(pq_phys *p, int64_t n, bool ba, mcdc_error *err) {
    p->n = 0;
    p->fixed.len = 0;
    p->data.len = 0;
    if (ba && n + 1 > p->offs_cap) {
        int64_t cap = n + 1 < 1024 ? 1024 : n + 1;
        int64_t *o = mcdc_realloc(p->offs, (size_t)cap * sizeof *o);
        if (o == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (values)");
        p->offs = o;
        p->offs_cap = cap;
    }
    if (ba) p->offs[0] = 0;
    return MCDC_OK;
}

static int corrupt(mcdc_error *err, const pq_cursor *c, const char *fmt, const char *detail) {
    char msg[256];
    snprintf(msg, sizeof msg, fmt, detail ? detail : "");
    return mcdc_error_set(err, MCDC_E_CORRUPT,
                          "Parquet file %s, row group %d, column '%s': %s; the file is damaged",
                          c->r->name, c->r->cur_rg, c->lx->path, msg);
}

static int wrap(mcdc_error *err, const pq_cursor *c, int rc) {
    mcdc_error_wrap(err, "Parquet file %s, row group %d, column '%s'", c->r->name, c->r->cur_rg,
                    c->lx->path);
    return rc;
}

static int phys_width(const pq_leafx *lx) {
    switch (lx->phys) {
    case PQ_BOOLEAN: return 1;
    case PQ_INT32:
    case PQ_FLOAT: return 4;
    case PQ_INT64:
    case PQ_DOUBLE: return 8;
    case PQ_INT96: return 12;
    case PQ_FLBA: return lx->type_len;
    default: return 0;
    }
}

/* ---- schema mapping --------------------------------------------------------------- */

static int map_leaf(pq_leafx *lx, const pq_schema_elem *e, mcdc_type_id *type, int32_t *prec,
                    int32_t *scale, int32_t *width, mcdc_error *err, const char *fname) {
    *prec = *scale = *width = 0;
    lx->phys = e->type;
    lx->type_len = e->type_length;
    int ct = e->converted, lt = e->logical;
    bool is_dec = lt == PQ_LT_DECIMAL || ct == PQ_CT_DECIMAL;
    if (is_dec) {
        *prec = lt == PQ_LT_DECIMAL ? e->lt_precision : e->precision;
        *scale = lt == PQ_LT_DECIMAL ? e->lt_scale : e->scale;
    }
    switch (e->type) {
    case PQ_BOOLEAN: *type = MCDC_TYPE_BOOL; break;
    case PQ_INT32:
        if (is_dec) *type = MCDC_TYPE_DECIMAL;
        else if (lt == PQ_LT_DATE || ct == PQ_CT_DATE) *type = MCDC_TYPE_DATE32;
        else if ((lt == PQ_LT_INTEGER && !e->lt_signed) || ct == PQ_CT_UINT_8 ||
                 ct == PQ_CT_UINT_16 || ct == PQ_CT_UINT_32) {
            lx->is_unsigned = true;
            int bits = lt == PQ_LT_INTEGER ? e->lt_bits
                       : ct == PQ_CT_UINT_8 ? 8 : ct == PQ_CT_UINT_16 ? 16 : 32;
            *type = bits <= 8 ? MCDC_TYPE_INT16 : bits <= 16 ? MCDC_TYPE_INT32 : MCDC_TYPE_INT64;
        } else if ((lt == PQ_LT_INTEGER && e->lt_bits == 8) || ct == PQ_CT_INT_8) *type = MCDC_TYPE_INT8;
        else if ((lt == PQ_LT_INTEGER && e->lt_bits == 16) || ct == PQ_CT_INT_16) *type = MCDC_TYPE_INT16;
        else *type = MCDC_TYPE_INT32;
        break;
    case PQ_INT64:
        if (is_dec) *type = MCDC_TYPE_DECIMAL;
        else if (lt == PQ_LT_TIMESTAMP) {
            *type = e->lt_utc ? MCDC_TYPE_TIMESTAMP_UTC : MCDC_TYPE_TIMESTAMP_NTZ;
            lx->unit = e->lt_unit ? e->lt_unit : PQ_UNIT_MICROS;
        } else if (ct == PQ_CT_TIMESTAMP_MILLIS || ct == PQ_CT_TIMESTAMP_MICROS) {
            *type = MCDC_TYPE_TIMESTAMP_UTC;
            lx->unit = ct == PQ_CT_TIMESTAMP_MILLIS ? PQ_UNIT_MILLIS : PQ_UNIT_MICROS;
        } else if ((lt == PQ_LT_INTEGER && !e->lt_signed) || ct == PQ_CT_UINT_64) {
            lx->is_unsigned = true; /* uint64 does not fit int64: decimal(20,0) */
            *type = MCDC_TYPE_DECIMAL;
            *prec = 20;
            *scale = 0;
        } else *type = MCDC_TYPE_INT64;
        break;
    case PQ_INT96: *type = MCDC_TYPE_TIMESTAMP_UTC; break;
    case PQ_FLOAT: *type = MCDC_TYPE_FLOAT; break;
    case PQ_DOUBLE: *type = MCDC_TYPE_DOUBLE; break;
    case PQ_BYTE_ARRAY:
        if (is_dec) *type = MCDC_TYPE_DECIMAL;
        else if (lt == PQ_LT_STRING || lt == PQ_LT_JSON || lt == PQ_LT_ENUM || ct == PQ_CT_UTF8 ||
                 ct == PQ_CT_JSON || ct == PQ_CT_ENUM)
            *type = MCDC_TYPE_UTF8;
        else *type = MCDC_TYPE_BINARY;
        break;
    case PQ_FLBA:
        if (e->type_length <= 0 || e->type_length > (int32_t)MCDC_VALUE_BYTES_MAX)
            return mcdc_error_set(err, MCDC_E_CORRUPT, "Parquet file %s: column '%s' has fixed "
                                  "length %d", fname, lx->path, e->type_length);
        if (is_dec) *type = MCDC_TYPE_DECIMAL;
        else {
            *type = MCDC_TYPE_FIXED_BINARY;
            *width = e->type_length;
        }
        break;
    default:
        return mcdc_error_set(err, MCDC_E_CORRUPT, "Parquet file %s: column '%s' has physical "
                              "type %d", fname, lx->path, e->type);
    }
    if (*type == MCDC_TYPE_DECIMAL && (*prec < 1 || *prec > 38 || *scale < 0 || *scale > *prec ||
                                       (e->type == PQ_FLBA && e->type_length > 16)))
        return mcdc_error_set(err, MCDC_E_UNSUPPORTED, "Parquet file %s: column '%s' is "
                              "decimal(%d,%d); precision 1-38 is supported", fname, lx->path,
                              *prec, *scale);
    return MCDC_OK;
}

typedef struct walk_ctx {
    mcdc_parquet_reader *r;
    int32_t pos;
    mcdc_buf path;
    int32_t cap;
    mcdc_error *err;
} walk_ctx;

static int walk(walk_ctx *w, int depth, int16_t def, int16_t rep, bool top_level) {
    mcdc_parquet_reader *r = w->r;
    if (depth > PQ_SCHEMA_DEPTH_MAX || w->pos >= r->meta.n_schema)
        return mcdc_error_set(w->err, MCDC_E_CORRUPT, "Parquet file %s: schema tree is "
                              "malformed (too deep or children missing)", r->name);
    int32_t idx = w->pos++;
    const pq_schema_elem *e = &r->meta.schema[idx];
    if (e->name == NULL)
        return mcdc_error_set(w->err, MCDC_E_CORRUPT, "Parquet file %s: schema element %d has "
                              "no name", r->name, idx);
    if (e->repetition == PQ_OPTIONAL) def++;
    if (e->repetition == PQ_REPEATED) {
        def++;
        rep++;
    }
    size_t mark = w->path.len;
    int rc = MCDC_OK;
    if (mark) rc = mcdc_buf_append_byte(&w->path, '.', w->err);
    if (!rc) rc = mcdc_buf_append_str(&w->path, e->name, w->err);
    if (!rc) rc = mcdc_buf_cstr(&w->path, w->err);
    if (rc) return rc;
    if (e->num_children > 0) {
        for (int32_t k = 0; k < e->num_children && !rc; k++) rc = walk(w, depth + 1, def, rep, false);
    } else {
        if (e->type < 0)
            return mcdc_error_set(w->err, MCDC_E_CORRUPT, "Parquet file %s: schema element '%s' "
                                  "is neither a group nor typed", r->name, e->name);
        MCDC_ASSERT(r->n_leaves < w->cap);
        pq_leafx *lx = &r->leaves[r->n_leaves++];
        lx->elem = idx;
        lx->max_def = def;
        lx->max_rep = rep;
        lx->flat = top_level && rep == 0;
        lx->path = mcdc_strdup((const char *)w->path.data);
        if (lx->path == NULL) return mcdc_error_set(w->err, MCDC_E_NOMEM, "out of memory");
        mcdc_type_id t;
        int32_t p, s, wd;
        rc = map_leaf(lx, e, &t, &p, &s, &wd, w->err, r->name);
        if (!rc) rc = mcdc_schema_create(&lx->one, 1, w->err);
        if (!rc) rc = mcdc_schema_set(lx->one, 0, e->name, t, p, s, wd, true, w->err);
        if (rc) return rc;
        lx->pub.path = lx->path;
        lx->pub.max_def = def;
        lx->pub.max_rep = rep;
        lx->pub.physical_type = e->type;
        lx->pub.field = &lx->one->fields[0];
    }
    w->path.len = mark;
    return rc;
}

static int build_schema(mcdc_parquet_reader *r, mcdc_error *err) {
    pq_file_meta *m = &r->meta;
    if (m->n_schema < 1 || m->schema[0].num_children < 0)
        return mcdc_error_set(err, MCDC_E_CORRUPT, "Parquet file %s: empty schema", r->name);
    r->leaves = mcdc_calloc((size_t)m->n_schema, sizeof *r->leaves);
    if (r->leaves == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (schema)");
    walk_ctx w = {r, 1, {0}, m->n_schema, err};
    int rc = MCDC_OK;
    for (int32_t k = 0; k < m->schema[0].num_children && !rc; k++) rc = walk(&w, 1, 0, 0, true);
    mcdc_buf_free(&w.path);
    if (rc) return rc;
    if (w.pos != m->n_schema)
        return mcdc_error_set(err, MCDC_E_CORRUPT, "Parquet file %s: schema has %d elements but "
                              "its tree uses %d", r->name, m->n_schema, w.pos);
    for (int32_t g = 0; g < m->n_row_groups; g++) {
        pq_row_group *rg = &m->row_groups[g];
        if (rg->n_columns != r->n_leaves || rg->num_rows < 0)
            return mcdc_error_set(err, MCDC_E_CORRUPT, "Parquet file %s: row group %d has %d "
                                  "columns, the schema %d leaves", r->name, g, rg->n_columns,
                                  r->n_leaves);
        for (int32_t i = 0; i < rg->n_columns; i++)
            if (rg->columns[i].type != r->leaves[i].phys)
                return mcdc_error_set(err, MCDC_E_CORRUPT, "Parquet file %s: row group %d column "
                                      "'%s' has type %d, the schema %d", r->name, g,
                                      r->leaves[i].path, rg->columns[i].type, r->leaves[i].phys);
    }
    int32_t n_flat = 0;
    for (int32_t i = 0; i < r->n_leaves; i++) n_flat += r->leaves[i].flat;
    r->flat_leaf = mcdc_calloc((size_t)(n_flat ? n_flat : 1), sizeof *r->flat_leaf);
    if (r->flat_leaf == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    if (n_flat == 0) return MCDC_OK;
    rc = mcdc_schema_create(&r->flat, n_flat, err);
    int32_t j = 0;
    for (int32_t i = 0; i < r->n_leaves && !rc; i++) {
        if (!r->leaves[i].flat) continue;
        const mcdc_field *f = r->leaves[i].pub.field;
        rc = mcdc_schema_set(r->flat, j, f->name, f->type, f->precision, f->scale, f->byte_width,
                             r->leaves[i].max_def > 0, err);
        r->flat_leaf[j++] = i;
    }
    return rc;
}

/* ---- opening ------------------------------------------------------------------- */

static int read_at(mcdc_parquet_reader *r, void *dst, size_t n, int64_t off, mcdc_error *err) {
    if (off < 0 || (int64_t)n > r->file_len || off > r->file_len - (int64_t)n)
        return mcdc_error_set(err, MCDC_E_CORRUPT, "Parquet file %s: reading %zu bytes at %lld "
                              "goes past its end (%lld bytes); the file is truncated or damaged",
                              r->name, n, (long long)off, (long long)r->file_len);
    if (r->mem) {
        memcpy(dst, r->mem + off, n);
        return MCDC_OK;
    }
    size_t got = 0;
    int rc = mcdc_storage_get_range(r->st, r->key, off, n, dst, &got, NULL, err);
    if (rc) {
        mcdc_error_wrap(err, "reading Parquet file %s at %lld", r->name, (long long)off);
        return rc;
    }
    if (got < n)
        return mcdc_error_set(err, MCDC_E_CORRUPT, "Parquet file %s: %zu bytes at %lld, only %zu "
                              "there; the file shrank while being read", r->name, n,
                              (long long)off, got);
    return MCDC_OK;
}

/* Decodes the footer. head: the file's first 4 bytes when the caller has
 * them already, else NULL. */
static int reader_init(mcdc_parquet_reader *r, const mcdc_parquet_read_options *opts,
                       const uint8_t *head, mcdc_error *err) {
    if (opts && opts->version != MCDC_PARQUET_READ_OPTIONS_VERSION)
        return mcdc_error_set(err, MCDC_E_INVALID, "Parquet read options version %d, expected %d",
                              opts->version, MCDC_PARQUET_READ_OPTIONS_VERSION);
    r->batch_rows = opts && opts->batch_rows > 0 ? opts->batch_rows : MCDC_BATCH_ROWS_DEFAULT;
    if (r->file_len < 12)
        return mcdc_error_set(err, MCDC_E_CORRUPT, "%s is not a Parquet file (%lld bytes, too "
                              "small for header and footer)", r->name, (long long)r->file_len);
    size_t tail_n = r->file_len < PQ_TAIL_GUESS_BYTES ? (size_t)r->file_len : PQ_TAIL_GUESS_BYTES;
    int64_t tail_off = r->file_len - (int64_t)tail_n;
    uint8_t *tail = mcdc_malloc(tail_n);
    if (tail == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (footer)");
    uint8_t head4[4];
    int rc = read_at(r, tail, tail_n, tail_off, err);
    if (!rc && head == NULL) {
        if (tail_off == 0) memcpy(head4, tail, 4);
        else rc = read_at(r, head4, 4, 0, err);
        head = head4;
    }
    const uint8_t *trailer = tail + tail_n - 8;
    if (!rc && (memcmp(head, "PAR1", 4) != 0 || memcmp(trailer + 4, "PAR1", 4) != 0))
        rc = mcdc_error_set(err, MCDC_E_CORRUPT, "%s is not a Parquet file (magic PAR1 "
                            "missing at its %s)", r->name,
                            memcmp(head, "PAR1", 4) ? "start" : "end");
    uint32_t flen = rc ? 0 : pq_le32(trailer);
    if (!rc && (int64_t)flen > r->file_len - 12)
        rc = mcdc_error_set(err, MCDC_E_CORRUPT, "Parquet file %s: footer length %u is beyond "
                            "the file (%lld bytes); the file is truncated or damaged", r->name,
                            flen, (long long)r->file_len);
    if (!rc && flen > MCDC_PARQUET_FOOTER_BYTES_MAX)
        rc = mcdc_error_set(err, MCDC_E_LIMIT, "Parquet file %s: footer of %u bytes is larger "
                            "than the %u we accept", r->name, flen,
                            MCDC_PARQUET_FOOTER_BYTES_MAX);
    if (!rc && (r->footer = mcdc_malloc(flen ? flen : 1)) == NULL)
        rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (footer)");
    if (!rc) {
        if ((size_t)flen + 8 <= tail_n) /* the guess covered it */
            memcpy(r->footer, trailer - flen, flen);
        else
            rc = read_at(r, r->footer, flen, r->file_len - 8 - flen, err);
    }
    mcdc_free(tail);
    if (rc) return rc;
    char what[600];
    snprintf(what, sizeof what, "Parquet file %s, footer", r->name);
    rc = mcdc_pq_meta_decode(&r->meta, r->footer, flen, what, err);
    if (rc) return rc;
    rc = build_schema(r, err);
    if (rc) return rc;
    r->rg_skip = mcdc_calloc((size_t)(r->meta.n_row_groups + 1), sizeof *r->rg_skip);
    if (r->rg_skip == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    return mcdc_parquet_reader_select(r, NULL, 0, err);
}

int mcdc_parquet_reader_open(mcdc_parquet_reader **out, mcdc_storage *st, const char *key,
                             const mcdc_parquet_read_options *opts, mcdc_error *err) {
    MCDC_ASSERT(st != NULL && key != NULL);
    *out = NULL;
    mcdc_parquet_reader *r = mcdc_calloc(1, sizeof *r);
    if (r == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (reader)");
    r->st = st;
    r->key = mcdc_strdup(key);
    r->name = mcdc_asprintf("%s/%s", st->root, key);
    int rc = MCDC_OK;
    if (r->key == NULL || r->name == NULL)
        rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (reader)");
    /* The first ranged read brings the size and the leading magic, and a
     * small file whole: its footer and column chunks are then read from
     * memory, not by a request each (on an object store a round trip). */
    int64_t whole = opts && opts->whole_bytes ? opts->whole_bytes
                                               : (int64_t)MCDC_PARQUET_READ_WHOLE_BYTES;
    size_t want = whole > 4 ? (size_t)whole : 4;
    uint8_t *first = rc ? NULL : mcdc_malloc(want);
    size_t got = 0;
    if (rc == MCDC_OK && first == NULL)
        rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (reader)");
    if (rc == MCDC_OK) {
        rc = mcdc_storage_get_range(st, key, 0, want, first, &got, &r->file_len, err);
        if (rc) mcdc_error_wrap(err, "cannot open Parquet file %s", r->name);
    }
    if (rc == MCDC_OK && whole > 0 && (int64_t)got == r->file_len) {
        r->own_mem = first;
        r->mem = first;
        first = NULL;
    }
    const uint8_t *head = r->mem ? r->mem : first;
    if (rc == MCDC_OK) rc = reader_init(r, opts, got >= 4 ? head : NULL, err);
    mcdc_free(first);
    if (rc) {
        mcdc_parquet_reader_free(r);
        return rc;
    }
    *out = r;
    return MCDC_OK;
}

int mcdc_parquet_reader_open_path(mcdc_parquet_reader **out, const char *path,
                                  const mcdc_parquet_read_options *opts, mcdc_error *err) {
    *out = NULL;
    mcdc_storage *st;
    const char *key;
    int rc = mcdc_parquet__local_path(&st, &key, path, err);
    if (rc == MCDC_OK) rc = mcdc_parquet_reader_open(out, st, key, opts, err);
    if (rc) {
        mcdc_storage_free(st);
        return rc;
    }
    (*out)->own_st = st;
    return MCDC_OK;
}

int mcdc_parquet_reader_open_mem(mcdc_parquet_reader **out, const void *data, size_t len,
                                 const char *name, const mcdc_parquet_read_options *opts,
                                 mcdc_error *err) {
    *out = NULL;
    mcdc_parquet_reader *r = mcdc_calloc(1, sizeof *r);
    if (r == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (reader)");
    r->mem = data ? data : (const uint8_t *)"";
    r->file_len = (int64_t)len;
    r->name = mcdc_strdup(name ? name : "(memory)");
    int rc = r->name ? reader_init(r, opts, NULL, err)
                     : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (reader)");
    if (rc) {
        mcdc_parquet_reader_free(r);
        return rc;
    }
    *out = r;
    return MCDC_OK;
}

static void cursor_close(pq_cursor *c) {
    mcdc_free(c->owned);
    mcdc_free(c->page);
    phys_free(&c->dict);
    phys_free(&c->ph);
    mcdc_free(c->ibuf);
    mcdc_buf_free(&c->scratch);
    mcdc_free(c->def);
    mcdc_free(c->rep);
    mcdc_batch_free(c->dense);
    mcdc_pq_codec_ctx_free(&c->dctx);
    memset(c, 0, sizeof *c);
}

static void close_cursors(mcdc_parquet_reader *r) {
    if (r->cursors)
        for (int32_t i = 0; i < r->n_sel; i++) cursor_close(&r->cursors[i]);
    r->cursors_open = false;
}

void mcdc_parquet_reader_free(mcdc_parquet_reader *r) {
    if (r == NULL) return;
    close_cursors(r);
    mcdc_batch_free(r->spare);
    mcdc_free(r->cursors);
    for (int32_t i = 0; i < r->n_leaves; i++) {
        mcdc_free(r->leaves[i].path);
        mcdc_schema_unref(r->leaves[i].one);
    }
    mcdc_free(r->leaves);
    mcdc_schema_unref(r->flat);
    mcdc_schema_unref(r->sel_schema);
    mcdc_free(r->flat_leaf);
    mcdc_free(r->sel_leaf);
    mcdc_free(r->rg_skip);
    mcdc_pq_meta_free(&r->meta);
    mcdc_free(r->footer);
    mcdc_free(r->name);
    mcdc_free(r->key);
    mcdc_storage_free(r->own_st);
    mcdc_free(r->own_mem);
    mcdc_free(r);
}

int64_t mcdc_parquet_reader_rows(const mcdc_parquet_reader *r) { return r->meta.num_rows; }
int32_t mcdc_parquet_reader_row_groups(const mcdc_parquet_reader *r) {
    return r->meta.n_row_groups;
}
int64_t mcdc_parquet_reader_row_group_rows(const mcdc_parquet_reader *r, int32_t rg) {
    MCDC_ASSERT(rg >= 0 && rg < r->meta.n_row_groups);
    return r->meta.row_groups[rg].num_rows;
}
const char *mcdc_parquet_reader_created_by(const mcdc_parquet_reader *r) {
    return r->meta.created_by ? r->meta.created_by : "";
}

int mcdc_parquet_reader_schema(const mcdc_schema **out, mcdc_parquet_reader *r,
                               mcdc_error *err) {
    *out = NULL;
    if (r->flat == NULL)
        return mcdc_error_set(err, MCDC_E_UNSUPPORTED, "Parquet file %s has no top-level "
                              "primitive column; read it with the leaf API", r->name);
    *out = r->flat;
    return MCDC_OK;
}

int mcdc_parquet_reader_select(mcdc_parquet_reader *r, const char *const *names, int32_t n,
                               mcdc_error *err) {
    if (r->started)
        return mcdc_error_set(err, MCDC_E_INVALID, "Parquet file %s: columns must be selected "
                              "before reading", r->name);
    int32_t n_flat = r->flat ? r->flat->n_fields : 0;
    if (n == 0) n = n_flat;
    if (n < 0 || n > MCDC_COLUMNS_MAX)
        return mcdc_error_set(err, MCDC_E_INVALID, "bad column count %d", n);
    int32_t *sel = mcdc_calloc((size_t)(n ? n : 1), sizeof *sel);
    if (sel == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    int rc = MCDC_OK;
    for (int32_t i = 0; i < n && !rc; i++) {
        int32_t k = names ? (r->flat ? mcdc_schema_find(r->flat, names[i]) : -1) : i;
        if (k < 0)
            rc = mcdc_error_set(err, MCDC_E_NOTFOUND, "Parquet file %s has no top-level "
                                "primitive column '%s'", r->name, names[i]);
        else sel[i] = k;
    }
    mcdc_schema *s = NULL;
    if (!rc && n > 0) rc = mcdc_schema_create(&s, n, err);
    for (int32_t i = 0; i < n && !rc; i++) {
        const mcdc_field *f = &r->flat->fields[sel[i]];
        rc = mcdc_schema_set(s, i, f->name, f->type, f->precision, f->scale, f->byte_width,
                             f->nullable, err);
        sel[i] = r->flat_leaf[sel[i]];
    }
    pq_cursor *cur = NULL;
    if (!rc) {
        cur = mcdc_calloc((size_t)(n ? n : 1), sizeof *cur);
        if (cur == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    if (rc) {
        mcdc_free(sel);
        mcdc_schema_unref(s);
        return rc;
    }
    mcdc_free(r->sel_leaf);
    mcdc_schema_unref(r->sel_schema);
    mcdc_free(r->cursors);
    r->sel_leaf = sel;
    r->sel_schema = s;
    r->cursors = cur;
    r->n_sel = n;
    return MCDC_OK;
}

/* ---- cursor: pages ------------------------------------------------------------- */

/* Points c at the chunk of (rg, leaf). A cursor already used for the same
 * leaf keeps its buffers (chunk, page, values, levels, dense batch, codec
 * context): reading row group after row group allocates (and page-faults)
 * nothing new. */
static int cursor_start(pq_cursor *c, mcdc_parquet_reader *r, int32_t rg, int32_t leaf,
                        mcdc_error *err) {
    c->r = r;
    c->lx = &r->leaves[leaf];
    c->cm = &r->meta.row_groups[rg].columns[leaf];
    c->pos = 0;
    c->has_dict = false;
    c->lv_n = c->lv_pos = 0;
    c->dense_pos = 0;
    int64_t start = c->cm->data_page_offset;
    if (c->cm->dict_page_offset > 0 && c->cm->dict_page_offset < start)
        start = c->cm->dict_page_offset;
    int64_t len = c->cm->total_compressed;
    if (start < 4 || len <= 0 || start > r->file_len || len > r->file_len - start)
        return mcdc_error_set(err, MCDC_E_CORRUPT, "Parquet file %s, row group %d, column '%s': "
                              "chunk at %lld of %lld bytes is outside the file (%lld bytes)",
                              r->name, rg, c->lx->path, (long long)start, (long long)len,
                              (long long)r->file_len);
    if (len > PQ_CHUNK_BYTES_MAX)
        return mcdc_error_set(err, MCDC_E_LIMIT, "Parquet file %s, row group %d, column '%s': "
                              "chunk of %lld bytes exceeds %lld", r->name, rg, c->lx->path,
                              (long long)len, (long long)PQ_CHUNK_BYTES_MAX);
    if (r->mem) {
        c->chunk = r->mem + start;
    } else {
        if ((size_t)len > c->owned_cap) {
            mcdc_free(c->owned);
            c->owned_cap = 0;
            c->owned = mcdc_malloc((size_t)len);
            if (c->owned == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (chunk)");
            c->owned_cap = (size_t)len;
        }
        int rc = read_at(r, c->owned, (size_t)len, start, err);
        if (rc) return rc;
        c->chunk = c->owned;
    }
    c->len = (size_t)len;
    if (c->dense) return MCDC_OK;
    return mcdc_batch_create(&c->dense, c->lx->one, 1024, err);
}

static int cursor_open(pq_cursor *c, mcdc_parquet_reader *r, int32_t rg, int32_t leaf,
                       mcdc_error *err) {
    memset(c, 0, sizeof *c);
    return cursor_start(c, r, rg, leaf, err);
}

static int ibuf_reserve(pq_cursor *c, int64_t n, mcdc_error *err) {
    if (n <= c->ibuf_cap) return MCDC_OK;
    int64_t cap = n < 4096 ? 4096 : n;
    uint32_t *p = mcdc_realloc(c->ibuf, (size_t)cap * sizeof *p);
    if (p == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (levels)");
    c->ibuf = p;
    c->ibuf_cap = cap;
    return MCDC_OK;
}

/* Decodes n levels (max lvl) at *pp into out, *at_max of them max (a
 * definition level's present values); v1 has a 4-byte length prefix (RLE)
 * or is BIT_PACKED; v2 passes its exact byte range (prefix=false). */
static int decode_levels(pq_cursor *c, const uint8_t **pp, const uint8_t *end, int enc,
                         bool prefix, int16_t max, int16_t *out, int64_t n, int64_t *at_max,
                         mcdc_error *err) {
    int width = pq_bit_width((uint64_t)max);
    int rc = ibuf_reserve(c, n, err);
    if (rc) return rc;
    const uint8_t *p = *pp;
    size_t avail = (size_t)(end - p);
    if (enc == PQ_BIT_PACKED) {
        size_t nb = (size_t)(((uint64_t)n * (uint64_t)width + 7) / 8);
        if (nb > avail) return corrupt(err, c, "bit-packed levels run past the page%s", NULL);
        if (mcdc_pq_unpack_msb(p, nb, width, c->ibuf, n)) return corrupt(err, c, "bad levels%s", NULL);
        *pp = p + nb;
    } else {
        size_t len = avail;
        if (prefix) {
            if (avail < 4) return corrupt(err, c, "levels length missing%s", NULL);
            len = pq_le32(p);
            p += 4;
            if (len > avail - 4) return corrupt(err, c, "levels length runs past the page%s", NULL);
        }
        if (mcdc_pq_rle_decode(p, len, width, c->ibuf, n, NULL))
            return corrupt(err, c, "levels do not decode%s", NULL);
        *pp = p + len;
    }
    /* one pass: checked, narrowed and counted (branch-free, so it vectorises) */
    uint32_t above = 0;
    int64_t full = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t v = c->ibuf[i];
        above |= v > (uint32_t)max;
        full += v == (uint32_t)max;
        out[i] = (int16_t)v;
    }
    if (above) return corrupt(err, c, "level above its maximum%s", NULL);
    *at_max = full;
    return MCDC_OK;
}

/* Text values are mostly short (codes, LSNs, names): a value of up to
 * PQ_SHORT_VALUE bytes is copied as that many, in two fixed moves and no
 * call, where both buffers have that many bytes from it (the values'
 * buffers are reserved with that much more, short_room; the bytes past a
 * value are overwritten by the next, or lie past the data's length). */
#define PQ_SHORT_VALUE 32
static size_t short_room(size_t total) {
    return total <= (size_t)MCDC_BATCH_BYTES_MAX - PQ_SHORT_VALUE ? total + PQ_SHORT_VALUE : total;
}
static inline void copy_short(uint8_t *dst, const uint8_t *src) {
    memcpy(dst, src, 16);
    memcpy(dst + 16, src + 16, 16);
}

/* PLAIN values into ph; bounded by the bytes present. */
static int decode_plain(pq_cursor *c, pq_phys *ph, const uint8_t *p, size_t n, int64_t nv,
                        mcdc_error *err) {
    const pq_leafx *lx = c->lx;
    int rc = phys_reset(ph, nv, lx->phys == PQ_BYTE_ARRAY, err);
    if (rc) return rc;
    if (lx->phys == PQ_BOOLEAN) {
        if ((uint64_t)nv > (uint64_t)n * 8) return corrupt(err, c, "booleans run past the page%s", NULL);
        if ((rc = mcdc_buf_reserve(&ph->fixed, (size_t)nv, err))) return rc;
        for (int64_t i = 0; i < nv; i++) ph->fixed.data[i] = (p[i >> 3] >> (i & 7)) & 1;
        ph->fixed.len = (size_t)nv;
    } else if (lx->phys == PQ_BYTE_ARRAY) {
        const uint8_t *q = p, *end = p + n;
        for (int64_t i = 0; i < nv; i++) {
            if (end - q < 4) return corrupt(err, c, "byte array runs past the page%s", NULL);
            uint32_t len = pq_le32(q);
            q += 4;
            if (len > (size_t)(end - q)) return corrupt(err, c, "byte array runs past the page%s", NULL);
            q += len;
        }
        size_t total = (size_t)(q - p) - (size_t)nv * 4;
        if ((rc = mcdc_buf_reserve(&ph->data, short_room(total), err))) return rc;
        q = p;
        int64_t off = 0;
        for (int64_t i = 0; i < nv; i++) {
            uint32_t len = pq_le32(q);
            if (len <= PQ_SHORT_VALUE && (size_t)(end - q) >= 4 + PQ_SHORT_VALUE &&
                (size_t)off + PQ_SHORT_VALUE <= ph->data.cap)
                copy_short(ph->data.data + off, q + 4);
            else if (len) memcpy(ph->data.data + off, q + 4, len);
            off += len;
            ph->offs[i + 1] = off;
            q += 4 + len;
        }
        ph->data.len = (size_t)off;
    } else {
        size_t w = (size_t)phys_width(lx);
        if ((uint64_t)nv * w > n) return corrupt(err, c, "values run past the page%s", NULL);
        if ((rc = mcdc_buf_append(&ph->fixed, p, (size_t)nv * w, err))) return rc;
    }
    ph->n = nv;
    return MCDC_OK;
}

static int decode_dict(pq_cursor *c, const uint8_t *p, size_t n, int64_t nv, mcdc_error *err) {
    if (!c->has_dict) return corrupt(err, c, "dictionary-encoded page without a dictionary%s", NULL);
    if (n < 1) return corrupt(err, c, "dictionary page data missing%s", NULL);
    int width = p[0];
    if (width > 32) return corrupt(err, c, "dictionary index width above 32%s", NULL);
    int rc = ibuf_reserve(c, nv, err);
    if (rc) return rc;
    if (mcdc_pq_rle_decode(p + 1, n - 1, width, c->ibuf, nv, NULL))
        return corrupt(err, c, "dictionary indices do not decode%s", NULL);
    const pq_phys *d = &c->dict;
    bool ba = c->lx->phys == PQ_BYTE_ARRAY;
    pq_phys *ph = &c->ph;
    if ((rc = phys_reset(ph, nv, ba, err))) return rc;
    uint32_t above = 0; /* an index past the dictionary: checked before any is used */
    for (int64_t i = 0; i < nv; i++) above |= c->ibuf[i] >= (uint64_t)d->n;
    if (above) return corrupt(err, c, "dictionary index out of range%s", NULL);
    if (ba) {
        size_t total = 0;
        for (int64_t i = 0; i < nv; i++)
            total += (size_t)(d->offs[c->ibuf[i] + 1] - d->offs[c->ibuf[i]]);
        if ((rc = mcdc_buf_reserve(&ph->data, short_room(total), err))) return rc;
        int64_t off = 0;
        for (int64_t i = 0; i < nv; i++) {
            int64_t a = d->offs[c->ibuf[i]], l = d->offs[c->ibuf[i] + 1] - a;
            if (l <= PQ_SHORT_VALUE && (size_t)a + PQ_SHORT_VALUE <= d->data.cap &&
                (size_t)off + PQ_SHORT_VALUE <= ph->data.cap)
                copy_short(ph->data.data + off, d->data.data + a);
            else memcpy(ph->data.data + off, d->data.data + a, (size_t)l);
            off += l;
            ph->offs[i + 1] = off;
        }
        ph->data.len = (size_t)off;
    } else {
        size_t w = (size_t)phys_width(c->lx);
        if ((rc = mcdc_buf_reserve(&ph->fixed, (size_t)nv * w, err))) return rc;
        uint8_t *o = ph->fixed.data;
        if (w == 4) {
            for (int64_t i = 0; i < nv; i++) memcpy(o + i * 4, d->fixed.data + (size_t)c->ibuf[i] * 4, 4);
        } else if (w == 8) {
            for (int64_t i = 0; i < nv; i++) memcpy(o + i * 8, d->fixed.data + (size_t)c->ibuf[i] * 8, 8);
        } else {
            for (int64_t i = 0; i < nv; i++)
                memcpy(o + (size_t)i * w, d->fixed.data + (size_t)c->ibuf[i] * w, w);
        }
        ph->fixed.len = (size_t)nv * w;
    }
    ph->n = nv;
    return MCDC_OK;
}

/* DELTA_BINARY_PACKED into an int64 scratch array. */
static int delta_ints(pq_cursor *c, const uint8_t *p, size_t n, int64_t nv, int64_t **vals,
                      size_t *used, mcdc_error *err) {
    c->scratch.len = 0;
    int rc = mcdc_buf_reserve(&c->scratch, (size_t)(nv + 1) * 8, err);
    if (rc) return rc;
    int64_t *v = (int64_t *)(void *)c->scratch.data;
    int64_t got;
    if (mcdc_pq_delta_decode(p, n, v, nv, &got, used) || got != nv)
        return corrupt(err, c, "DELTA_BINARY_PACKED values do not decode%s", NULL);
    *vals = v;
    return MCDC_OK;
}

static int decode_values(pq_cursor *c, int enc, const uint8_t *p, size_t n, int64_t nv,
                         mcdc_error *err) {
    const pq_leafx *lx = c->lx;
    pq_phys *ph = &c->ph;
    int rc;
    switch (enc) {
    case PQ_PLAIN:
        return decode_plain(c, ph, p, n, nv, err);
    case PQ_PLAIN_DICTIONARY:
    case PQ_RLE_DICTIONARY:
        return decode_dict(c, p, n, nv, err);
    case PQ_RLE: {
        if (lx->phys != PQ_BOOLEAN) break;
        if (n < 4 || pq_le32(p) > n - 4) return corrupt(err, c, "RLE booleans truncated%s", NULL);
        if ((rc = ibuf_reserve(c, nv, err))) return rc;
        if (mcdc_pq_rle_decode(p + 4, pq_le32(p), 1, c->ibuf, nv, NULL))
            return corrupt(err, c, "RLE booleans do not decode%s", NULL);
        if ((rc = phys_reset(ph, nv, false, err))) return rc;
        if ((rc = mcdc_buf_reserve(&ph->fixed, (size_t)nv, err))) return rc;
        for (int64_t i = 0; i < nv; i++) ph->fixed.data[i] = (uint8_t)c->ibuf[i];
        ph->fixed.len = (size_t)nv;
        ph->n = nv;
        return MCDC_OK;
    }
    case PQ_DELTA_BINARY_PACKED: {
        if (lx->phys != PQ_INT32 && lx->phys != PQ_INT64) break;
        int64_t *v;
        size_t used;
        if ((rc = delta_ints(c, p, n, nv, &v, &used, err))) return rc;
        if ((rc = phys_reset(ph, nv, false, err))) return rc;
        size_t w = lx->phys == PQ_INT32 ? 4 : 8;
        if ((rc = mcdc_buf_reserve(&ph->fixed, (size_t)nv * w, err))) return rc;
        if (w == 4) {
            for (int64_t i = 0; i < nv; i++) {
                int32_t x = (int32_t)(uint32_t)(uint64_t)v[i];
                memcpy(ph->fixed.data + i * 4, &x, 4);
            }
        } else {
            memcpy(ph->fixed.data, v, (size_t)nv * 8);
        }
        ph->fixed.len = (size_t)nv * w;
        ph->n = nv;
        return MCDC_OK;
    }
    case PQ_DELTA_LENGTH_BYTE_ARRAY:
    case PQ_DELTA_BYTE_ARRAY: {
        if (lx->phys != PQ_BYTE_ARRAY && !(enc == PQ_DELTA_BYTE_ARRAY && lx->phys == PQ_FLBA)) break;
        const uint8_t *q = p, *end = p + n;
        int64_t *prefix = NULL;
        size_t used;
        mcdc_buf pre = {0};
        if (enc == PQ_DELTA_BYTE_ARRAY) {
            if ((rc = delta_ints(c, q, (size_t)(end - q), nv, &prefix, &used, err))) return rc;
            /* keep the prefixes: the scratch is reused for the lengths */
            if ((rc = mcdc_buf_append(&pre, prefix, (size_t)nv * 8, err))) return rc;
            prefix = (int64_t *)(void *)pre.data;
            q += used;
        }
        int64_t *lens;
        rc = delta_ints(c, q, (size_t)(end - q), nv, &lens, &used, err);
        if (rc) {
            mcdc_buf_free(&pre);
            return rc;
        }
        q += used;
        bool ba = lx->phys == PQ_BYTE_ARRAY;
        /* built as byte arrays; FLBA values move to `fixed` at the end */
        if ((rc = phys_reset(ph, nv, true, err))) {
            mcdc_buf_free(&pre);
            return rc;
        }
        int64_t total = 0;
        for (int64_t i = 0; i < nv && !rc; i++) {
            int64_t pl = prefix ? prefix[i] : 0;
            int64_t prev_len = i ? ph->offs[i] - ph->offs[i - 1] : 0;
            if (lens[i] < 0 || pl < 0 || pl > prev_len || lens[i] > end - q ||
                total + pl + lens[i] > (int64_t)MCDC_BATCH_BYTES_MAX) {
                rc = corrupt(err, c, "delta byte arrays are inconsistent%s", NULL);
                break;
            }
            if ((rc = mcdc_buf_reserve(&ph->data, (size_t)(pl + lens[i]), err))) break;
            uint8_t *d = ph->data.data + total;
            if (pl) memmove(d, ph->data.data + ph->offs[i - 1], (size_t)pl);
            memcpy(d + pl, q, (size_t)lens[i]);
            q += lens[i];
            total += pl + lens[i];
            ph->data.len = (size_t)total;
            ph->offs[i + 1] = total;
        }
        mcdc_buf_free(&pre);
        if (rc) return rc;
        ph->n = nv;
        if (!ba) { /* FLBA: every value must have the fixed length */
            if (total != (int64_t)nv * lx->type_len)
                return corrupt(err, c, "delta byte arrays do not match the fixed length%s", NULL);
            mcdc_buf tmp = ph->fixed;
            ph->fixed = ph->data;
            ph->data = tmp;
            ph->data.len = 0;
        }
        return MCDC_OK;
    }
    case PQ_BYTE_STREAM_SPLIT: {
        size_t w = (size_t)phys_width(lx);
        if (lx->phys == PQ_BOOLEAN || lx->phys == PQ_BYTE_ARRAY || w == 0) break;
        if ((uint64_t)nv * w > n) return corrupt(err, c, "byte stream split runs past the page%s", NULL);
        if ((rc = phys_reset(ph, nv, false, err))) return rc;
        if ((rc = mcdc_buf_reserve(&ph->fixed, (size_t)nv * w, err))) return rc;
        uint8_t *o = ph->fixed.data;
        for (size_t k = 0; k < w; k++) {
            const uint8_t *s = p + k * (size_t)nv;
            for (int64_t i = 0; i < nv; i++) o[(size_t)i * w + k] = s[i];
        }
        ph->fixed.len = (size_t)nv * w;
        ph->n = nv;
        return MCDC_OK;
    }
    default: break;
    }
    char what[64];
    snprintf(what, sizeof what, "%d", enc);
    return mcdc_error_set(err, MCDC_E_UNSUPPORTED, "Parquet file %s, column '%s': encoding %s "
                          "is not supported for physical type %d", c->r->name, lx->path, what,
                          lx->phys);
}

/* ---- physical -> mcdc type ------------------------------------------------------- */

static void be_to_dec(const uint8_t *p, size_t n, uint8_t out[16]) {
    memset(out, n && (p[0] & 0x80) ? 0xFF : 0, 16);
    for (size_t j = 0; j < n; j++) out[j] = p[n - 1 - j];
}

static int64_t ts_to_us(int64_t v, int unit) {
    if (unit == PQ_UNIT_MILLIS) return (int64_t)((uint64_t)v * 1000u);
    if (unit == PQ_UNIT_NANOS) return v >= 0 ? v / 1000 : -((-(v + 1)) / 1000) - 1;
    return v;
}

static int64_t int96_to_us(const uint8_t *p) {
    int64_t nanos = (int64_t)pq_le64(p);
    int64_t jd = (int64_t)pq_le32(p + 8);
    int64_t ns_us = nanos >= 0 ? nanos / 1000 : -((-(nanos + 1)) / 1000) - 1;
    return (int64_t)((uint64_t)(jd - 2440588) * 86400000000ull + (uint64_t)ns_us);
}

/* Appends ph's n values to the dense column (no nulls). */
static int convert(pq_cursor *c, mcdc_error *err) {
    const pq_leafx *lx = c->lx;
    pq_phys *ph = &c->ph;
    mcdc_batch_reset(c->dense);
    mcdc_column *d = &c->dense->columns[0];
    const mcdc_field *f = d->field;
    int64_t n = ph->n;
    int64_t bytes = lx->phys == PQ_BYTE_ARRAY && f->type != MCDC_TYPE_DECIMAL ? ph->offs[n] : 0;
    bool swapped = false;
    if ((f->type == MCDC_TYPE_UTF8 || f->type == MCDC_TYPE_BINARY) && d->offsets != NULL &&
        d->offsets[0] == 0 && ph->data.data != NULL) {
        /* the value bytes change hands instead of being copied (both
         * buffers come from mcdc_malloc; the other one is reused next page) */
        uint8_t *t = d->data;
        int64_t tc = d->data_cap;
        d->data = ph->data.data;
        d->data_cap = (int64_t)ph->data.cap;
        ph->data.data = t;
        ph->data.cap = t ? (size_t)tc : 0;
        ph->data.len = 0;
        swapped = true;
    }
    int rc = mcdc_col_reserve(d, n, bytes, err);
    if (rc) return rc;
    const uint8_t *s = ph->fixed.data;
    uint8_t *v = d->values;
    switch (f->type) {
    case MCDC_TYPE_BOOL:
        for (int64_t i = 0; i < n; i++) {
            if (s[i]) v[i >> 3] |= (uint8_t)(1u << (i & 7));
            else v[i >> 3] &= (uint8_t) ~(1u << (i & 7));
        }
        break;
    case MCDC_TYPE_INT8:
        for (int64_t i = 0; i < n; i++) ((int8_t *)v)[i] = (int8_t)(int32_t)pq_le32(s + i * 4);
        break;
    case MCDC_TYPE_INT16:
        for (int64_t i = 0; i < n; i++)
            ((int16_t *)(void *)v)[i] = lx->is_unsigned ? (int16_t)(pq_le32(s + i * 4) & 0xFF)
                                                       : (int16_t)(int32_t)pq_le32(s + i * 4);
        break;
    case MCDC_TYPE_INT32:
        if (lx->is_unsigned) {
            for (int64_t i = 0; i < n; i++) ((int32_t *)(void *)v)[i] = (int32_t)(pq_le32(s + i * 4) & 0xFFFF);
        } else {
            memcpy(v, s, (size_t)n * 4);
        }
        break;
    case MCDC_TYPE_DATE32:
    case MCDC_TYPE_FLOAT:
        memcpy(v, s, (size_t)n * 4);
        break;
    case MCDC_TYPE_INT64:
        if (lx->phys == PQ_INT32) { /* UINT_32 */
            for (int64_t i = 0; i < n; i++) ((int64_t *)(void *)v)[i] = (int64_t)pq_le32(s + i * 4);
        } else {
            memcpy(v, s, (size_t)n * 8);
        }
        break;
    case MCDC_TYPE_DOUBLE:
        memcpy(v, s, (size_t)n * 8);
        break;
    case MCDC_TYPE_TIMESTAMP_NTZ:
    case MCDC_TYPE_TIMESTAMP_UTC:
        if (lx->phys == PQ_INT96) {
            for (int64_t i = 0; i < n; i++) ((int64_t *)(void *)v)[i] = int96_to_us(s + i * 12);
        } else if (lx->unit == PQ_UNIT_MICROS) {
            memcpy(v, s, (size_t)n * 8);
        } else {
            for (int64_t i = 0; i < n; i++)
                ((int64_t *)(void *)v)[i] = ts_to_us((int64_t)pq_le64(s + i * 8), lx->unit);
        }
        break;
    case MCDC_TYPE_DECIMAL:
        for (int64_t i = 0; i < n; i++) {
            uint8_t t[16];
            if (lx->phys == PQ_INT32) {
                int64_t x = (int32_t)pq_le32(s + i * 4);
                memset(t, x < 0 ? 0xFF : 0, 16);
                memcpy(t, &x, 8);
            } else if (lx->phys == PQ_INT64) {
                int64_t x = (int64_t)pq_le64(s + i * 8);
                memset(t, (x < 0 && !lx->is_unsigned) ? 0xFF : 0, 16);
                memcpy(t, &x, 8);
            } else if (lx->phys == PQ_FLBA) {
                be_to_dec(s + (size_t)i * (size_t)lx->type_len, (size_t)lx->type_len, t);
            } else {
                int64_t a = ph->offs[i], l = ph->offs[i + 1] - a;
                if (l > 16) return corrupt(err, c, "decimal of more than 16 bytes%s", NULL);
                be_to_dec(ph->data.data + a, (size_t)l, t);
            }
            memcpy(v + i * 16, t, 16);
        }
        break;
    case MCDC_TYPE_UTF8:
    case MCDC_TYPE_BINARY: {
        int32_t base = d->offsets[0];
        if (bytes && !swapped) memcpy(d->data, ph->data.data, (size_t)bytes);
        for (int64_t i = 0; i <= n; i++) d->offsets[i] = base + (int32_t)ph->offs[i];
        d->data_len = bytes;
        break;
    }
    case MCDC_TYPE_FIXED_BINARY:
        memcpy(v, s, (size_t)n * (size_t)lx->type_len);
        break;
    default: MCDC_UNREACHABLE();
    }
    d->length = n;
    return MCDC_OK;
}

static int lv_reserve(pq_cursor *c, int64_t n, mcdc_error *err) {
    if (n <= c->lv_cap) return MCDC_OK;
    int64_t cap = n < 4096 ? 4096 : n;
    int16_t *d = mcdc_realloc(c->def, (size_t)cap * sizeof *d);
    if (d == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (levels)");
    c->def = d;
    int16_t *r = mcdc_realloc(c->rep, (size_t)cap * sizeof *r);
    if (r == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (levels)");
    c->rep = r;
    c->lv_cap = cap;
    return MCDC_OK;
}

static int page_reserve(pq_cursor *c, size_t n, mcdc_error *err) {
    if (n <= c->page_cap) return MCDC_OK;
    uint8_t *p = mcdc_realloc(c->page, n);
    if (p == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (page of %zu bytes)", n);
    c->page = p;
    c->page_cap = n;
    return MCDC_OK;
}

/* Loads the next data page. *end = true when the chunk has no more. */
static int load_page(pq_cursor *c, bool *end, mcdc_error *err) {
    const pq_leafx *lx = c->lx;
    int codec = c->cm->codec;
    *end = false;
    for (;;) {
        if (c->pos >= c->len) {
            *end = true;
            return MCDC_OK;
        }
        pq_page_header h;
        size_t used;
        char what[700];
        snprintf(what, sizeof what, "Parquet file %s, row group %d, column '%s', page at %zu",
                 c->r->name, c->r->cur_rg, lx->path, c->pos);
        int rc = mcdc_pq_page_header_decode(&h, c->chunk + c->pos, c->len - c->pos, &used, what, err);
        if (rc) return rc;
        c->pos += used;
        if ((size_t)h.compressed_size > c->len - c->pos)
            return corrupt(err, c, "page header claims more bytes than the chunk holds%s", NULL);
        const uint8_t *body = c->chunk + c->pos;
        size_t body_n = (size_t)h.compressed_size;
        c->pos += body_n;
        if (h.type != PQ_DATA_PAGE && h.type != PQ_DATA_PAGE_V2 && h.type != PQ_DICTIONARY_PAGE)
            continue; /* index pages and unknown kinds */
        if (h.num_values > PQ_PAGE_VALUES_MAX)
            return mcdc_error_set(err, MCDC_E_LIMIT, "Parquet file %s, column '%s': page of %d "
                                  "values exceeds %d", c->r->name, lx->path, h.num_values,
                                  PQ_PAGE_VALUES_MAX);
        if ((size_t)h.uncompressed_size > (size_t)MCDC_BATCH_BYTES_MAX)
            return mcdc_error_set(err, MCDC_E_LIMIT, "Parquet file %s, column '%s': page of %d "
                                  "bytes exceeds the limit", c->r->name, lx->path,
                                  h.uncompressed_size);
        if (h.type == PQ_DICTIONARY_PAGE) {
            if (c->has_dict) return corrupt(err, c, "second dictionary page%s", NULL);
            const uint8_t *data = body;
            if (codec != MCDC_PARQUET_UNCOMPRESSED) {
                if ((rc = page_reserve(c, (size_t)h.uncompressed_size + 1, err))) return rc;
                if ((rc = mcdc_pq_decompress(&c->dctx, codec, body, body_n, c->page,
                                             (size_t)h.uncompressed_size, err)))
                    return wrap(err, c, rc);
                data = c->page;
                body_n = (size_t)h.uncompressed_size;
            }
            if (h.encoding != PQ_PLAIN && h.encoding != PQ_PLAIN_DICTIONARY)
                return corrupt(err, c, "dictionary page is not PLAIN%s", NULL);
            if ((rc = decode_plain(c, &c->dict, data, body_n, h.num_values, err))) return rc;
            c->has_dict = true;
            continue;
        }
        int64_t nlv = h.num_values;
        if ((rc = lv_reserve(c, nlv, err))) return rc;
        int64_t nv = nlv, reps = 0; /* values present: the definition levels at their max */
        const uint8_t *p, *pend;
        const uint8_t *vals;
        size_t vals_n;
        if (h.type == PQ_DATA_PAGE) {
            p = body;
            if (codec != MCDC_PARQUET_UNCOMPRESSED) {
                if ((rc = page_reserve(c, (size_t)h.uncompressed_size + 1, err))) return rc;
                if ((rc = mcdc_pq_decompress(&c->dctx, codec, body, body_n, c->page,
                                             (size_t)h.uncompressed_size, err)))
                    return wrap(err, c, rc);
                p = c->page;
                body_n = (size_t)h.uncompressed_size;
            }
            pend = p + body_n;
            if (lx->max_rep > 0 &&
                (rc = decode_levels(c, &p, pend, h.rep_encoding, true, lx->max_rep, c->rep, nlv, &reps, err)))
                return rc;
            if (lx->max_def > 0 &&
                (rc = decode_levels(c, &p, pend, h.def_encoding, true, lx->max_def, c->def, nlv, &nv, err)))
                return rc;
            vals = p;
            vals_n = (size_t)(pend - p);
        } else {
            size_t lv_bytes = (size_t)h.rep_len + (size_t)h.def_len;
            if (lv_bytes > body_n || lv_bytes > (size_t)h.uncompressed_size)
                return corrupt(err, c, "v2 level lengths exceed the page%s", NULL);
            p = body;
            if (lx->max_rep > 0 &&
                (rc = decode_levels(c, &p, body + h.rep_len, PQ_RLE, false, lx->max_rep, c->rep, nlv, &reps, err)))
                return rc;
            p = body + h.rep_len;
            if (lx->max_def > 0 &&
                (rc = decode_levels(c, &p, body + lv_bytes, PQ_RLE, false, lx->max_def, c->def, nlv, &nv, err)))
                return rc;
            vals = body + lv_bytes;
            vals_n = body_n - lv_bytes;
            size_t raw_n = (size_t)h.uncompressed_size - lv_bytes;
            if (h.is_compressed && codec != MCDC_PARQUET_UNCOMPRESSED) {
                if ((rc = page_reserve(c, raw_n + 1, err))) return rc;
                if ((rc = mcdc_pq_decompress(&c->dctx, codec, vals, vals_n, c->page, raw_n, err)))
                    return wrap(err, c, rc);
                vals = c->page;
                vals_n = raw_n;
            }
        }
        if ((rc = decode_values(c, h.encoding, vals, vals_n, nv, err))) return rc;
        if ((rc = convert(c, err))) return rc;
        c->lv_dense = nv == nlv;
        c->lv_n = nlv;
        c->lv_pos = 0;
        c->dense_pos = 0;
        return MCDC_OK;
    }
}

static int ensure_validity(mcdc_column *d, mcdc_error *err) {
    if (d->validity) return MCDC_OK;
    /* Same convention as mcdc_batch.c: capacity bits, all set (valid). */
    size_t nb = (size_t)(d->capacity + 7) / 8;
    d->validity = mcdc_malloc(nb ? nb : 1);
    if (d->validity == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    memset(d->validity, 0xFF, nb ? nb : 1);
    return MCDC_OK;
}

/* Appends level entries [lv_pos, lv_pos + n) of the page to d. */
static int spread(pq_cursor *c, mcdc_column *d, int64_t n, mcdc_error *err) {
    if (n == 0) return MCDC_OK;
    const mcdc_column *s = &c->dense->columns[0];
    const int16_t *def = c->lx->max_def > 0 && !c->lv_dense ? c->def + c->lv_pos : NULL;
    int16_t md = c->lx->max_def;
    int64_t np = n;
    if (def) {
        np = 0;
        for (int64_t i = 0; i < n; i++) np += def[i] == md;
    }
    if (c->dense_pos + np > s->length) return corrupt(err, c, "fewer values than levels%s", NULL);
    bool var = s->offsets != NULL && (s->field->type == MCDC_TYPE_UTF8 || s->field->type == MCDC_TYPE_BINARY);
    int64_t bytes = var ? s->offsets[c->dense_pos + np] - s->offsets[c->dense_pos] : 0;
    int rc = mcdc_col_reserve(d, n, bytes, err);
    if (rc) return rc;
    if (np < n && (rc = ensure_validity(d, err))) return rc;
    int64_t at = d->length, j = c->dense_pos;
    mcdc_type_id t = s->field->type;
    int32_t w = t == MCDC_TYPE_BOOL || var ? 0 : mcdc_type_width(s->field);
    if (np == n && t != MCDC_TYPE_BOOL) {
        /* no nulls in the range: bulk copies, no per-value branches */
        if (d->validity)
            for (int64_t o = at; o < at + n; o++) d->validity[o >> 3] |= (uint8_t)(1u << (o & 7));
        if (var) {
            int32_t base = d->offsets[at], a = s->offsets[j];
            if (bytes) memcpy(d->data + base, s->data + a, (size_t)bytes);
            for (int64_t i = 0; i < n; i++) d->offsets[at + i + 1] = base + (s->offsets[j + i + 1] - a);
            d->data_len = d->offsets[at + n];
        } else {
            memcpy(d->values + at * w, s->values + j * w, (size_t)(n * w));
        }
        d->length += n;
        c->dense_pos = j + n;
        c->lv_pos += n;
        return MCDC_OK;
    }
    if (var) {
        /* present values' bytes are contiguous on both sides: one copy */
        int32_t base = d->offsets[at], a0 = s->offsets[j];
        if (bytes) memcpy(d->data + base, s->data + a0, (size_t)bytes);
        int32_t off = base;
        for (int64_t i = 0; i < n; i++) {
            int64_t o = at + i;
            bool present = def == NULL || def[i] == md;
            if (present) d->validity[o >> 3] |= (uint8_t)(1u << (o & 7));
            else d->validity[o >> 3] &= (uint8_t) ~(1u << (o & 7));
            if (present) {
                off += s->offsets[j + 1] - s->offsets[j];
                j++;
            }
            d->offsets[o + 1] = off;
        }
        d->data_len = d->offsets[at + n];
        d->length += n;
        d->null_count += n - np;
        c->dense_pos = j;
        c->lv_pos += n;
        return MCDC_OK;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t o = at + i;
        bool present = def == NULL || def[i] == md;
        if (d->validity) {
            if (present) d->validity[o >> 3] |= (uint8_t)(1u << (o & 7));
            else d->validity[o >> 3] &= (uint8_t) ~(1u << (o & 7));
        }
        if (t == MCDC_TYPE_BOOL) {
            bool bit = present && ((s->values[j >> 3] >> (j & 7)) & 1);
            if (bit) d->values[o >> 3] |= (uint8_t)(1u << (o & 7));
            else d->values[o >> 3] &= (uint8_t) ~(1u << (o & 7));
            j += present;
        } else if (w == 4) {
            uint32_t x = 0;
            if (present) memcpy(&x, s->values + j * 4, 4);
            memcpy(d->values + o * 4, &x, 4);
            j += present;
        } else if (w == 8) {
            uint64_t x = 0;
            if (present) memcpy(&x, s->values + j * 8, 8);
            memcpy(d->values + o * 8, &x, 8);
            j += present;
        } else if (present) {
            memcpy(d->values + o * w, s->values + j * w, (size_t)w);
            j++;
        } else {
            memset(d->values + o * w, 0, (size_t)w);
        }
    }
    d->length += n;
    d->null_count += n - np;
    c->dense_pos = j;
    c->lv_pos += n;
    return MCDC_OK;
}

/* Reads n rows of a flat column into d. */
static int cursor_read(pq_cursor *c, mcdc_column *d, int64_t n, mcdc_error *err) {
    while (n > 0) {
        if (c->lv_pos >= c->lv_n) {
            bool end;
            int rc = load_page(c, &end, err);
            if (rc) return rc;
            if (end) return corrupt(err, c, "column chunk ends before the row group's rows%s", NULL);
            continue;
        }
        int64_t k = c->lv_n - c->lv_pos;
        if (k > n) k = n;
        int rc = spread(c, d, k, err);
        if (rc) return rc;
        n -= k;
    }
    return MCDC_OK;
}

/* ---- row group pruning ------------------------------------------------------------- */

static int cmp_value(const mcdc_field *f, const mcdc_parquet_value *a, const mcdc_parquet_value *b) {
    switch (f->type) {
    case MCDC_TYPE_FLOAT:
    case MCDC_TYPE_DOUBLE: return (a->d > b->d) - (a->d < b->d);
    case MCDC_TYPE_DECIMAL:
        if (a->dec_hi != b->dec_hi) return a->dec_hi < b->dec_hi ? -1 : 1;
        return (a->dec_lo > b->dec_lo) - (a->dec_lo < b->dec_lo);
    case MCDC_TYPE_UTF8:
    case MCDC_TYPE_BINARY:
    case MCDC_TYPE_FIXED_BINARY: {
        int64_t m = a->len < b->len ? a->len : b->len;
        int r = m ? memcmp(a->bytes, b->bytes, (size_t)m) : 0;
        if (r) return r;
        return (a->len > b->len) - (a->len < b->len);
    }
    default: return (a->i > b->i) - (a->i < b->i);
    }
}

/* Typed value of a statistic; false if it cannot be trusted or decoded. */
static bool stat_value(const mcdc_parquet_reader *r, const pq_leafx *lx, const pq_stats *st,
                       const uint8_t *p, size_t n, mcdc_parquet_value *v) {
    memset(v, 0, sizeof *v);
    const mcdc_field *f = lx->pub.field;
    bool bytes_order = f->type == MCDC_TYPE_UTF8 || f->type == MCDC_TYPE_BINARY ||
                       f->type == MCDC_TYPE_FIXED_BINARY ||
                       (f->type == MCDC_TYPE_DECIMAL && lx->phys >= PQ_BYTE_ARRAY);
    if (bytes_order && (st->legacy || !r->meta.has_column_orders)) return false;
    if (lx->is_unsigned || lx->phys == PQ_INT96) return false;
    switch (f->type) {
    case MCDC_TYPE_BOOL:
        if (n < 1) return false;
        v->i = p[0] != 0;
        return true;
    case MCDC_TYPE_INT8:
    case MCDC_TYPE_INT16:
    case MCDC_TYPE_INT32:
    case MCDC_TYPE_DATE32:
        if (n != 4) return false;
        v->i = (int32_t)pq_le32(p);
        return true;
    case MCDC_TYPE_INT64:
    case MCDC_TYPE_TIMESTAMP_NTZ:
    case MCDC_TYPE_TIMESTAMP_UTC:
        if (n != 8) return false;
        v->i = ts_to_us((int64_t)pq_le64(p), lx->unit ? lx->unit : PQ_UNIT_MICROS);
        return true;
    case MCDC_TYPE_FLOAT: {
        if (n != 4) return false;
        float x;
        memcpy(&x, p, 4);
        v->d = x;
        return v->d == v->d;
    }
    case MCDC_TYPE_DOUBLE:
        if (n != 8) return false;
        memcpy(&v->d, p, 8);
        return v->d == v->d;
    case MCDC_TYPE_DECIMAL: {
        uint8_t t[16];
        if (lx->phys == PQ_INT32 && n == 4) {
            int64_t x = (int32_t)pq_le32(p);
            v->dec_lo = (uint64_t)x;
            v->dec_hi = x < 0 ? -1 : 0;
            return true;
        }
        if (lx->phys == PQ_INT64 && n == 8) {
            int64_t x = (int64_t)pq_le64(p);
            v->dec_lo = (uint64_t)x;
            v->dec_hi = x < 0 ? -1 : 0;
            return true;
        }
        if (lx->phys < PQ_BYTE_ARRAY || n < 1 || n > 16) return false;
        be_to_dec(p, n, t);
        memcpy(&v->dec_lo, t, 8);
        memcpy(&v->dec_hi, t + 8, 8);
        return true;
    }
    default:
        v->bytes = p;
        v->len = (int64_t)n;
        return true;
    }
}

static bool rg_excluded(const mcdc_parquet_reader *r, int32_t g, const pq_filter *flt) {
    const pq_leafx *lx = &r->leaves[flt->leaf];
    const pq_row_group *rg = &r->meta.row_groups[g];
    const pq_chunk_meta *cm = &rg->columns[flt->leaf];
    const pq_stats *st = &cm->stats;
    if (st->has_null_count && rg->num_rows > 0 && st->null_count >= rg->num_rows &&
        lx->max_rep == 0)
        return true; /* all null: no comparison holds */
    if (st->min == NULL || st->max == NULL) return false;
    mcdc_parquet_value mn, mx;
    if (!stat_value(r, lx, st, st->min, st->min_len, &mn) ||
        !stat_value(r, lx, st, st->max, st->max_len, &mx))
        return false;
    const mcdc_field *f = lx->pub.field;
    int lo = cmp_value(f, &flt->v, &mn), hi = cmp_value(f, &flt->v, &mx);
    switch (flt->op) {
    case MCDC_PARQUET_EQ: return lo < 0 || hi > 0;
    case MCDC_PARQUET_LT: return lo <= 0; /* v <= min: no x < v */
    case MCDC_PARQUET_LE: return lo < 0;
    case MCDC_PARQUET_GT: return hi >= 0;
    case MCDC_PARQUET_GE: return hi > 0;
    }
    return false;
}

int mcdc_parquet_reader_filter(mcdc_parquet_reader *r, const char *column, mcdc_parquet_op op,
                               const mcdc_parquet_value *value, mcdc_error *err) {
    if (r->started)
        return mcdc_error_set(err, MCDC_E_INVALID, "Parquet file %s: filters must be set before "
                              "reading", r->name);
    int32_t leaf = mcdc_parquet_reader_find_leaf(r, column);
    if (leaf < 0 || !r->leaves[leaf].flat)
        return mcdc_error_set(err, MCDC_E_NOTFOUND, "Parquet file %s has no top-level column "
                              "'%s' to filter on", r->name, column);
    if (op < MCDC_PARQUET_EQ || op > MCDC_PARQUET_GE)
        return mcdc_error_set(err, MCDC_E_INVALID, "bad filter operator %d", (int)op);
    pq_filter flt = {leaf, op, *value, NULL};
    for (int32_t g = 0; g < r->meta.n_row_groups; g++)
        if (!r->rg_skip[g] && rg_excluded(r, g, &flt)) r->rg_skip[g] = true;
    return MCDC_OK;
}

bool mcdc_parquet_reader_row_group_selected(const mcdc_parquet_reader *r, int32_t rg) {
    MCDC_ASSERT(rg >= 0 && rg < r->meta.n_row_groups);
    return !r->rg_skip[rg];
}

/* ---- batches ----------------------------------------------------------------------- */

int mcdc_parquet_reader_next(mcdc_batch **out, mcdc_parquet_reader *r, mcdc_error *err) {
    *out = NULL;
    r->started = true;
    if (r->n_sel == 0)
        return mcdc_error_set(err, MCDC_E_UNSUPPORTED, "Parquet file %s: no top-level primitive "
                              "column selected; read nested columns with the leaf API",
                              r->name);
    int rc;
    for (;;) {
        if (r->cur_rg >= r->meta.n_row_groups) return MCDC_OK;
        if (!r->cursors_open) {
            if (r->rg_skip[r->cur_rg] || r->meta.row_groups[r->cur_rg].num_rows == 0) {
                r->cur_rg++;
                continue;
            }
            for (int32_t i = 0; i < r->n_sel; i++) {
                pq_cursor *c = &r->cursors[i];
                /* cursors of the previous row group keep their buffers */
                if (c->lx == &r->leaves[r->sel_leaf[i]])
                    rc = cursor_start(c, r, r->cur_rg, r->sel_leaf[i], err);
                else
                    rc = cursor_open(c, r, r->cur_rg, r->sel_leaf[i], err);
                if (rc) {
                    r->cursors_open = true;
                    close_cursors(r);
                    return rc;
                }
            }
            r->cursors_open = true;
            r->rg_left = r->meta.row_groups[r->cur_rg].num_rows;
        }
        break;
    }
    int64_t k = r->rg_left < r->batch_rows ? r->rg_left : r->batch_rows;
    mcdc_batch *b = r->spare;
    if (b) {
        r->spare = NULL;
        mcdc_batch_reset(b);
    } else if ((rc = mcdc_batch_create(&b, r->sel_schema, k, err))) {
        return rc;
    }
    for (int32_t i = 0; i < r->n_sel && !rc; i++) rc = cursor_read(&r->cursors[i], &b->columns[i], k, err);
    if (!rc) rc = mcdc_batch_seal(b, err);
    if (rc) {
        mcdc_batch_free(b);
        return rc;
    }
    r->rg_left -= k;
    if (r->rg_left == 0) {
        r->cursors_open = false; /* buffers stay for the next row group */
        r->cur_rg++;
    }
    *out = b;
    return MCDC_OK;
}

void mcdc_parquet_reader_recycle(mcdc_parquet_reader *r, mcdc_batch *b) {
    if (b == NULL) return;
    if (r->spare == NULL && b->schema == r->sel_schema) r->spare = b;
    else mcdc_batch_free(b);
}

/* ---- leaf API ---------------------------------------------------------------------- */

int32_t mcdc_parquet_reader_leaves(const mcdc_parquet_reader *r) { return r->n_leaves; }

const mcdc_parquet_leaf *mcdc_parquet_reader_leaf(const mcdc_parquet_reader *r, int32_t i) {
    MCDC_ASSERT(i >= 0 && i < r->n_leaves);
    return &r->leaves[i].pub;
}

int32_t mcdc_parquet_reader_find_leaf(const mcdc_parquet_reader *r, const char *path) {
    for (int32_t i = 0; i < r->n_leaves; i++)
        if (strcmp(r->leaves[i].path, path) == 0) return i;
    return -1;
}

void mcdc_parquet_leaf_data_free(mcdc_parquet_leaf_data *d) {
    if (d == NULL) return;
    mcdc_free(d->def);
    mcdc_free(d->rep);
    mcdc_batch_free(d->values);
    memset(d, 0, sizeof *d);
}

int mcdc_parquet_reader_read_leaf(mcdc_parquet_leaf_data *out, mcdc_parquet_reader *r,
                                  int32_t rg, int32_t leaf, mcdc_error *err) {
    memset(out, 0, sizeof *out);
    if (rg < 0 || rg >= r->meta.n_row_groups || leaf < 0 || leaf >= r->n_leaves)
        return mcdc_error_set(err, MCDC_E_INVALID, "Parquet file %s: no row group %d / leaf %d",
                              r->name, rg, leaf);
    int32_t saved = r->cur_rg;
    r->cur_rg = rg; /* for error messages */
    pq_cursor c;
    const pq_leafx *lx = &r->leaves[leaf];
    int rc = cursor_open(&c, r, rg, leaf, err);
    if (!rc) rc = mcdc_batch_create(&out->values, lx->one, 1024, err);
    int64_t cap = 0;
    while (!rc) {
        bool end;
        rc = load_page(&c, &end, err);
        if (rc || end) break;
        int64_t n = c.lv_n;
        if (n == 0) continue; /* an empty page */
        if (out->n + n > cap) {
            int64_t nc = cap ? cap : 4096;
            while (nc < out->n + n) nc *= 2;
            if (lx->max_def > 0) {
                int16_t *d = mcdc_realloc(out->def, (size_t)nc * sizeof *d);
                if (d == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (levels)");
                else out->def = d;
            }
            if (!rc && lx->max_rep > 0) {
                int16_t *p = mcdc_realloc(out->rep, (size_t)nc * sizeof *p);
                if (p == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (levels)");
                else out->rep = p;
            }
            if (rc) break;
            cap = nc;
        }
        if (lx->max_def > 0) memcpy(out->def + out->n, c.def, (size_t)n * sizeof *c.def);
        if (lx->max_rep > 0) memcpy(out->rep + out->n, c.rep, (size_t)n * sizeof *c.rep);
        rc = spread(&c, &out->values->columns[0], n, err);
        out->n += n;
    }
    if (!rc) rc = mcdc_batch_seal(out->values, err);
    cursor_close(&c);
    r->cur_rg = saved;
    if (rc) mcdc_parquet_leaf_data_free(out);
    return rc;
}
