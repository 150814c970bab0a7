/* mcdc_delta_checkpoint_write.c - classic single-part checkpoints (formats.md A8).
 *
 * The Parquet writer of src/parquet writes flat schemas only; a checkpoint
 * needs nested optional structs, maps and lists. The checkpoint schema is
 * fixed, so this file shreds actions (as JSON objects) into the leaf columns
 * of that schema by the Dremel rules and writes one uncompressed row group of
 * PLAIN data pages (v1, RLE levels), using the Thrift compact writer of the
 * Parquet module for headers and footer. When the Parquet module grows a
 * nested writer, this file shrinks to the shredding. */
#include "mcdc_delta_internal.h"
#include "mcdc_delta_dv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_thrift.h"

typedef enum { K_GROUP, K_MAP, K_LIST, K_STR, K_I64, K_I32, K_BOOL } node_kind;

typedef struct cp_node {
    const char *name;
    node_kind kind;
    int n_children; /* direct children (groups only) */
} cp_node;

/* Pre-order, Spark's checkpoint layout; maps expand to key_value{key, value},
 * lists to list{element}. */
static const cp_node k_schema[] = {
    {"txn", K_GROUP, 3},
    {"appId", K_STR, 0}, {"version", K_I64, 0}, {"lastUpdated", K_I64, 0},
    {"add", K_GROUP, 10},
    {"path", K_STR, 0}, {"partitionValues", K_MAP, 0}, {"size", K_I64, 0},
    {"modificationTime", K_I64, 0}, {"dataChange", K_BOOL, 0}, {"tags", K_MAP, 0},
    {"deletionVector", K_GROUP, 6},
    {"storageType", K_STR, 0}, {"pathOrInlineDv", K_STR, 0}, {"offset", K_I32, 0},
    {"sizeInBytes", K_I32, 0}, {"cardinality", K_I64, 0}, {"maxRowIndex", K_I64, 0},
    {"baseRowId", K_I64, 0}, {"defaultRowCommitVersion", K_I64, 0}, {"stats", K_STR, 0},
    {"remove", K_GROUP, 9},
    {"path", K_STR, 0}, {"deletionTimestamp", K_I64, 0}, {"dataChange", K_BOOL, 0},
    {"extendedFileMetadata", K_BOOL, 0}, {"partitionValues", K_MAP, 0}, {"size", K_I64, 0},
    {"deletionVector", K_GROUP, 6},
    {"storageType", K_STR, 0}, {"pathOrInlineDv", K_STR, 0}, {"offset", K_I32, 0},
    {"sizeInBytes", K_I32, 0}, {"cardinality", K_I64, 0}, {"maxRowIndex", K_I64, 0},
    {"baseRowId", K_I64, 0}, {"defaultRowCommitVersion", K_I64, 0},
    {"metaData", K_GROUP, 8},
    {"id", K_STR, 0}, {"name", K_STR, 0}, {"description", K_STR, 0},
    {"format", K_GROUP, 2}, {"provider", K_STR, 0}, {"options", K_MAP, 0},
    {"schemaString", K_STR, 0}, {"partitionColumns", K_LIST, 0},
    {"configuration", K_MAP, 0}, {"createdTime", K_I64, 0},
    {"protocol", K_GROUP, 4},
    {"minReaderVersion", K_I32, 0}, {"minWriterVersion", K_I32, 0},
    {"readerFeatures", K_LIST, 0}, {"writerFeatures", K_LIST, 0},
    {"domainMetadata", K_GROUP, 3},
    {"domain", K_STR, 0}, {"configuration", K_STR, 0}, {"removed", K_BOOL, 0},
};
enum { N_NODES = (int)(sizeof k_schema / sizeof k_schema[0]), N_TOP = 6, N_LEAVES_MAX = 64 };

/* Parquet enums (parquet.thrift). */
enum { T_BOOLEAN = 0, T_INT32 = 1, T_INT64 = 2, T_BYTE_ARRAY = 6 };
enum { R_REQUIRED = 0, R_OPTIONAL = 1, R_REPEATED = 2 };
enum { CT_UTF8 = 0, CT_MAP = 1, CT_LIST = 3 };

typedef struct cp_column {
    char path[128];     /* dotted */
    const char *parts[5];
    int n_parts;
    int ptype;
    int max_def;
    int max_rep;
    uint32_t *def;      /* level entries */
    uint32_t *rep;
    int64_t n;
    int64_t cap;
    mcdc_buf values;    /* PLAIN */
    uint8_t bool_bits;  /* pending bits of a boolean column */
    int bool_count;
} cp_column;

typedef struct shredder {
    int node_end[N_NODES];   /* index after the subtree */
    int first_leaf[N_NODES];
    int n_leaves_of[N_NODES];
    int def_of[N_NODES];     /* definition level when the node is present */
    cp_column cols[N_LEAVES_MAX];
    int n_cols;
    int rc;
    mcdc_error *err;
} shredder;

/* ---- schema ------------------------------------------------------------ */

static int leaves_of(node_kind k) { return k == K_MAP ? 2 : k == K_GROUP ? 0 : 1; }

static void add_column(shredder *s, const char *const *parts, int n, int ptype, int def,
                       int rep) {
    MCDC_ASSERT(s->n_cols < N_LEAVES_MAX);
    cp_column *c = &s->cols[s->n_cols++];
    memset(c, 0, sizeof *c);
    c->path[0] = 0;
    for (int i = 0; i < n; i++) {
        c->parts[i] = parts[i];
        if (i) strcat(c->path, ".");
        strcat(c->path, parts[i]);
    }
    c->n_parts = n;
    c->ptype = ptype;
    c->max_def = def;
    c->max_rep = rep;
    c->values.limit = MCDC_DELTA_COMMIT_BYTES_MAX;
}

/* Walks the subtree at i (parent path parts, parent def level); returns the
 * index after it. */
static int build(shredder *s, int i, const char **parts, int depth, int def) {
    const cp_node *nd = &k_schema[i];
    parts[depth] = nd->name;
    s->def_of[i] = def + 1; /* every named node is optional */
    s->first_leaf[i] = s->n_cols;
    int next = i + 1;
    switch (nd->kind) {
    case K_GROUP:
        for (int c = 0; c < nd->n_children; c++) next = build(s, next, parts, depth + 1, def + 1);
        break;
    case K_MAP: {
        const char *kp[5] = {0};
        for (int d = 0; d <= depth; d++) kp[d] = parts[d];
        kp[depth + 1] = "key_value";
        kp[depth + 2] = "key";
        add_column(s, kp, depth + 3, T_BYTE_ARRAY, def + 2, 1); /* key required */
        kp[depth + 2] = "value";
        add_column(s, kp, depth + 3, T_BYTE_ARRAY, def + 3, 1);
        break;
    }
    case K_LIST: {
        const char *lp[5] = {0};
        for (int d = 0; d <= depth; d++) lp[d] = parts[d];
        lp[depth + 1] = "list";
        lp[depth + 2] = "element";
        add_column(s, lp, depth + 3, T_BYTE_ARRAY, def + 3, 1);
        break;
    }
    case K_STR: add_column(s, parts, depth + 1, T_BYTE_ARRAY, def + 1, 0); break;
    case K_I64: add_column(s, parts, depth + 1, T_INT64, def + 1, 0); break;
    case K_I32: add_column(s, parts, depth + 1, T_INT32, def + 1, 0); break;
    case K_BOOL: add_column(s, parts, depth + 1, T_BOOLEAN, def + 1, 0); break;
    }
    s->n_leaves_of[i] = s->n_cols - s->first_leaf[i];
    s->node_end[i] = next;
    MCDC_ASSERT(nd->kind == K_GROUP || s->n_leaves_of[i] == leaves_of(nd->kind));
    return next;
}

static void shredder_init(shredder *s, mcdc_error *err) {
    memset(s, 0, sizeof *s);
    s->err = err;
    const char *parts[5];
    int i = 0;
    for (int t = 0; t < N_TOP; t++) i = build(s, i, parts, 0, 0);
    MCDC_ASSERT(i == N_NODES);
}

static void shredder_free(shredder *s) {
    for (int i = 0; i < s->n_cols; i++) {
        mcdc_free(s->cols[i].def);
        mcdc_free(s->cols[i].rep);
        mcdc_buf_free(&s->cols[i].values);
    }
}

/* ---- shredding ------------------------------------------------------------ */

static void level(shredder *s, cp_column *c, int rep, int def) {
    if (s->rc) return;
    if (c->n == c->cap) {
        int64_t cap = c->cap ? c->cap * 2 : 256;
        uint32_t *d = mcdc_realloc(c->def, (size_t)cap * sizeof *d);
        if (d) c->def = d;
        uint32_t *r = d ? mcdc_realloc(c->rep, (size_t)cap * sizeof *r) : NULL;
        if (r) c->rep = r;
        if (d == NULL || r == NULL) {
            s->rc = mcdc_error_set(s->err, MCDC_E_NOMEM, "out of memory writing a checkpoint");
            return;
        }
        c->cap = cap;
    }
    c->def[c->n] = (uint32_t)def;
    c->rep[c->n] = (uint32_t)rep;
    c->n++;
}

static void put_bytes(shredder *s, cp_column *c, const char *p, size_t n) {
    if (s->rc) return;
    uint32_t len = (uint32_t)n;
    if (n > UINT32_MAX) {
        s->rc = mcdc_error_set(s->err, MCDC_E_LIMIT, "checkpoint value too large");
        return;
    }
    s->rc = mcdc_buf_append(&c->values, &len, 4, s->err);
    if (!s->rc) s->rc = mcdc_buf_append(&c->values, p, n, s->err);
}

static void put_bool(shredder *s, cp_column *c, bool v) {
    if (v) c->bool_bits = (uint8_t)(c->bool_bits | (1u << c->bool_count));
    if (++c->bool_count == 8) {
        if (!s->rc) s->rc = mcdc_buf_append_byte(&c->values, c->bool_bits, s->err);
        c->bool_bits = 0;
        c->bool_count = 0;
    }
}

/* Every leaf under node i gets (rep, def): the node is null or empty. */
static void nulls(shredder *s, int i, int rep, int def) {
    for (int l = 0; l < s->n_leaves_of[i]; l++) level(s, &s->cols[s->first_leaf[i] + l], rep, def);
}

static void shred(shredder *s, int i, const json_t *v, int rep) {
    const cp_node *nd = &k_schema[i];
    int def = s->def_of[i];
    cp_column *c = &s->cols[s->first_leaf[i]];
    switch (nd->kind) {
    case K_GROUP: {
        if (!json_is_object(v)) {
            nulls(s, i, rep, def - 1);
            return;
        }
        for (int ch = i + 1; ch < s->node_end[i]; ch = s->node_end[ch])
            shred(s, ch, json_object_get(v, k_schema[ch].name), rep);
        return;
    }
    case K_MAP: {
        if (!json_is_object(v)) {
            nulls(s, i, rep, def - 1);
            return;
        }
        if (json_object_size(v) == 0) {
            nulls(s, i, rep, def);
            return;
        }
        int r = rep;
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x) {
            level(s, &c[0], r, def + 1);
            put_bytes(s, &c[0], k, strlen(k));
            if (json_is_string(x)) {
                level(s, &c[1], r, def + 2);
                put_bytes(s, &c[1], json_string_value(x), json_string_length(x));
            } else {
                level(s, &c[1], r, def + 1);
            }
            r = 1;
        }
        return;
    }
    case K_LIST: {
        if (!json_is_array(v)) {
            nulls(s, i, rep, def - 1);
            return;
        }
        if (json_array_size(v) == 0) {
            nulls(s, i, rep, def);
            return;
        }
        int r = rep;
        size_t idx;
        json_t *x;
        json_array_foreach(v, idx, x) {
            if (json_is_string(x)) {
                level(s, c, r, def + 2);
                put_bytes(s, c, json_string_value(x), json_string_length(x));
            } else {
                level(s, c, r, def + 1);
            }
            r = 1;
        }
        return;
    }
    case K_STR:
        if (!json_is_string(v)) break;
        level(s, c, rep, def);
        put_bytes(s, c, json_string_value(v), json_string_length(v));
        return;
    case K_I64:
    case K_I32: {
        if (!json_is_integer(v)) break;
        level(s, c, rep, def);
        int64_t x = (int64_t)json_integer_value(v);
        if (nd->kind == K_I32) {
            int32_t y = (int32_t)x;
            if (!s->rc) s->rc = mcdc_buf_append(&c->values, &y, 4, s->err);
        } else if (!s->rc) {
            s->rc = mcdc_buf_append(&c->values, &x, 8, s->err);
        }
        return;
    }
    case K_BOOL:
        if (!json_is_boolean(v)) break;
        level(s, c, rep, def);
        put_bool(s, c, json_is_true(v));
        return;
    }
    level(s, c, rep, def - 1); /* absent leaf */
}

/* One row: an object with exactly one of the top-level keys. */
static void shred_row(shredder *s, const json_t *row) {
    int i = 0;
    for (int t = 0; t < N_TOP; t++) {
        shred(s, i, json_object_get(row, k_schema[i].name), 0);
        i = s->node_end[i];
    }
}

/* ---- Parquet encoding --------------------------------------------------- */

static int bit_width(uint32_t v) {
    int w = 0;
    while (v) {
        w++;
        v >>= 1;
    }
    return w;
}

static int put_varint(mcdc_buf *b, uint64_t v, mcdc_error *err) {
    uint8_t tmp[10];
    int n = 0;
    do {
        uint8_t byte = v & 0x7F;
        v >>= 7;
        tmp[n++] = (uint8_t)(byte | (v ? 0x80 : 0));
    } while (v);
    return mcdc_buf_append(b, tmp, (size_t)n, err);
}

/* RLE/bit-packing hybrid with RLE runs only, prefixed by its 4-byte length. */
static int put_levels(mcdc_buf *b, const uint32_t *v, int64_t n, int max, mcdc_error *err) {
    int width = bit_width((uint32_t)max);
    int bytes = (width + 7) / 8;
    size_t len_at = b->len;
    uint32_t zero = 0;
    int rc = mcdc_buf_append(b, &zero, 4, err);
    for (int64_t i = 0; i < n && !rc;) {
        int64_t j = i + 1;
        while (j < n && v[j] == v[i]) j++;
        rc = put_varint(b, (uint64_t)(j - i) << 1, err);
        for (int k = 0; k < bytes && !rc; k++) rc = mcdc_buf_append_byte(b, (uint8_t)(v[i] >> (8 * k)), err);
        i = j;
    }
    if (rc) return rc;
    uint32_t len = (uint32_t)(b->len - len_at - 4);
    memcpy(b->data + len_at, &len, 4);
    return MCDC_OK;
}

typedef struct chunk_meta {
    int64_t offset;
    int64_t bytes;
    int64_t num_values;
} chunk_meta;

/* Writes one column chunk (a single data page) at the end of file. */
static int write_chunk(mcdc_buf *file, cp_column *c, chunk_meta *m, mcdc_error *err) {
    int rc = MCDC_OK;
    if (c->ptype == T_BOOLEAN && c->bool_count)
        rc = mcdc_buf_append_byte(&c->values, c->bool_bits, err);
    mcdc_buf page = {0};
    page.limit = MCDC_DELTA_COMMIT_BYTES_MAX;
    if (!rc && c->max_rep > 0) rc = put_levels(&page, c->rep, c->n, c->max_rep, err);
    if (!rc && c->max_def > 0) rc = put_levels(&page, c->def, c->n, c->max_def, err);
    if (!rc && c->values.len) rc = mcdc_buf_append(&page, c->values.data, c->values.len, err);
    if (!rc && (page.len > INT32_MAX || c->n > INT32_MAX))
        rc = mcdc_error_set(err, MCDC_E_LIMIT, "checkpoint column %s is too large for one page",
                            c->path);
    if (rc) {
        mcdc_buf_free(&page);
        return rc;
    }
    m->offset = (int64_t)file->len;
    m->num_values = c->n;
    mcdc_thrift_writer w;
    mcdc_thrift_writer_init(&w, file, err);
    mcdc_thrift_struct_begin(&w); /* PageHeader */
    mcdc_thrift_field_i32(&w, 1, 0); /* DATA_PAGE */
    mcdc_thrift_field_i32(&w, 2, (int32_t)page.len);
    mcdc_thrift_field_i32(&w, 3, (int32_t)page.len);
    mcdc_thrift_field_struct(&w, 5); /* DataPageHeader */
    mcdc_thrift_field_i32(&w, 1, (int32_t)c->n);
    mcdc_thrift_field_i32(&w, 2, 0); /* PLAIN */
    mcdc_thrift_field_i32(&w, 3, 3); /* RLE */
    mcdc_thrift_field_i32(&w, 4, 3); /* RLE */
    mcdc_thrift_struct_end(&w);
    mcdc_thrift_struct_end(&w);
    rc = w.rc;
    if (!rc) rc = mcdc_buf_append(file, page.data, page.len, err);
    m->bytes = (int64_t)file->len - m->offset;
    mcdc_buf_free(&page);
    return rc;
}

static void schema_element(mcdc_thrift_writer *w, const char *name, int ptype, int repetition,
                           int children, int converted) {
    mcdc_thrift_struct_begin(w);
    if (ptype >= 0) mcdc_thrift_field_i32(w, 1, ptype);
    if (repetition >= 0) mcdc_thrift_field_i32(w, 3, repetition);
    mcdc_thrift_field_string(w, 4, name);
    if (children >= 0) mcdc_thrift_field_i32(w, 5, children);
    if (converted >= 0) mcdc_thrift_field_i32(w, 6, converted);
    mcdc_thrift_struct_end(w);
}

static int count_elements(void) {
    int n = 1; /* root */
    for (int i = 0; i < N_NODES; i++)
        n += k_schema[i].kind == K_MAP ? 4 : k_schema[i].kind == K_LIST ? 3 : 1;
    return n;
}

static void write_schema(mcdc_thrift_writer *w) {
    mcdc_thrift_field_list(w, 2, MCDC_TT_STRUCT, count_elements());
    schema_element(w, "spark_schema", -1, R_REQUIRED, N_TOP, -1);
    for (int i = 0; i < N_NODES; i++) {
        const cp_node *nd = &k_schema[i];
        switch (nd->kind) {
        case K_GROUP: schema_element(w, nd->name, -1, R_OPTIONAL, nd->n_children, -1); break;
        case K_MAP:
            schema_element(w, nd->name, -1, R_OPTIONAL, 1, CT_MAP);
            schema_element(w, "key_value", -1, R_REPEATED, 2, -1);
            schema_element(w, "key", T_BYTE_ARRAY, R_REQUIRED, -1, CT_UTF8);
            schema_element(w, "value", T_BYTE_ARRAY, R_OPTIONAL, -1, CT_UTF8);
            break;
        case K_LIST:
            schema_element(w, nd->name, -1, R_OPTIONAL, 1, CT_LIST);
            schema_element(w, "list", -1, R_REPEATED, 1, -1);
            schema_element(w, "element", T_BYTE_ARRAY, R_OPTIONAL, -1, CT_UTF8);
            break;
        case K_STR: schema_element(w, nd->name, T_BYTE_ARRAY, R_OPTIONAL, -1, CT_UTF8); break;
        case K_I64: schema_element(w, nd->name, T_INT64, R_OPTIONAL, -1, -1); break;
        case K_I32: schema_element(w, nd->name, T_INT32, R_OPTIONAL, -1, -1); break;
        case K_BOOL: schema_element(w, nd->name, T_BOOLEAN, R_OPTIONAL, -1, -1); break;
        }
    }
}

/* Encodes rows (JSON objects, one action each) as a checkpoint Parquet file. */
static int encode_checkpoint(mcdc_buf *file, json_t *const *rows, size_t n_rows,
                             mcdc_error *err) {
    shredder *s = mcdc_calloc(1, sizeof *s);
    if (s == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    shredder_init(s, err);
    for (size_t r = 0; r < n_rows && !s->rc; r++) shred_row(s, rows[r]);
    int rc = s->rc;
    chunk_meta meta[N_LEAVES_MAX];
    if (!rc) rc = mcdc_buf_append(file, "PAR1", 4, err);
    for (int c = 0; c < s->n_cols && !rc; c++) {
        MCDC_ASSERT(s->cols[c].n >= (int64_t)n_rows); /* paired with the shredding */
        rc = write_chunk(file, &s->cols[c], &meta[c], err);
    }
    if (!rc) {
        size_t footer_at = file->len;
        int64_t total = (int64_t)footer_at - 4;
        mcdc_thrift_writer w;
        mcdc_thrift_writer_init(&w, file, err);
        mcdc_thrift_struct_begin(&w); /* FileMetaData */
        mcdc_thrift_field_i32(&w, 1, 1);
        write_schema(&w);
        mcdc_thrift_field_i64(&w, 3, (int64_t)n_rows);
        mcdc_thrift_field_list(&w, 4, MCDC_TT_STRUCT, 1);
        mcdc_thrift_struct_begin(&w); /* RowGroup */
        mcdc_thrift_field_list(&w, 1, MCDC_TT_STRUCT, s->n_cols);
        for (int c = 0; c < s->n_cols; c++) {
            const cp_column *col = &s->cols[c];
            mcdc_thrift_struct_begin(&w); /* ColumnChunk */
            mcdc_thrift_field_i64(&w, 2, meta[c].offset);
            mcdc_thrift_field_struct(&w, 3); /* ColumnMetaData */
            mcdc_thrift_field_i32(&w, 1, col->ptype);
            mcdc_thrift_field_list(&w, 2, MCDC_TT_I32, 2);
            mcdc_thrift_elem_i32(&w, 0);
            mcdc_thrift_elem_i32(&w, 3);
            mcdc_thrift_field_list(&w, 3, MCDC_TT_BINARY, col->n_parts);
            for (int p = 0; p < col->n_parts; p++)
                mcdc_thrift_elem_binary(&w, col->parts[p], strlen(col->parts[p]));
            mcdc_thrift_field_i32(&w, 4, 0); /* UNCOMPRESSED */
            mcdc_thrift_field_i64(&w, 5, meta[c].num_values);
            mcdc_thrift_field_i64(&w, 6, meta[c].bytes);
            mcdc_thrift_field_i64(&w, 7, meta[c].bytes);
            mcdc_thrift_field_i64(&w, 9, meta[c].offset);
            mcdc_thrift_struct_end(&w);
            mcdc_thrift_struct_end(&w);
        }
        mcdc_thrift_field_i64(&w, 2, total);
        mcdc_thrift_field_i64(&w, 3, (int64_t)n_rows);
        mcdc_thrift_field_i64(&w, 5, 4);
        mcdc_thrift_field_i64(&w, 6, total);
        mcdc_thrift_struct_end(&w);
        mcdc_thrift_field_string(&w, 6, "mssql-cdc version " MCDC_VERSION_STRING);
        mcdc_thrift_struct_end(&w);
        rc = w.rc;
        uint32_t footer_len = (uint32_t)(file->len - footer_at);
        if (!rc) rc = mcdc_buf_append(file, &footer_len, 4, err);
        if (!rc) rc = mcdc_buf_append(file, "PAR1", 4, err);
    }
    shredder_free(s);
    mcdc_free(s);
    return rc;
}

/* ---- actions of a snapshot as rows ---------------------------------------- */

static json_t *wrap(const char *kind, json_t *body) {
    json_t *o = json_object();
    if (o == NULL || body == NULL || json_object_set_new(o, kind, body)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *file_row(const mcdc_delta_file *f, bool is_add) {
    char *esc = mcdc_delta__path_escape(f->path);
    json_t *o = json_object();
    json_t *pv = f->partition_values_json ? json_loads(f->partition_values_json, 0, NULL)
                                          : json_object();
    bool bad = esc == NULL || o == NULL || pv == NULL;
    if (!bad) {
        bad |= json_object_set_new(o, "path", json_string(esc)) != 0;
        bad |= json_object_set_new(o, "partitionValues", pv) != 0;
        pv = NULL;
        bad |= json_object_set_new(o, "dataChange", json_boolean(f->data_change)) != 0;
        if (f->size_bytes >= 0) bad |= json_object_set_new(o, "size", json_integer(f->size_bytes)) != 0;
        if (is_add) {
            bad |= json_object_set_new(o, "modificationTime",
                                       json_integer(f->modification_time_ms)) != 0;
            if (f->stats_json) bad |= json_object_set_new(o, "stats", json_string(f->stats_json)) != 0;
        } else {
            bad |= json_object_set_new(o, "deletionTimestamp",
                                       json_integer(f->deletion_timestamp_ms)) != 0;
            bad |= json_object_set_new(o, "extendedFileMetadata",
                                       json_boolean(f->size_bytes >= 0)) != 0;
        }
        if (f->dv.storage_type)
            bad |= json_object_set_new(o, "deletionVector", mcdc_dv_descriptor_json(&f->dv)) != 0;
    }
    json_decref(pv);
    mcdc_free(esc);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return wrap(is_add ? "add" : "remove", o);
}

/* delta.deletedFileRetentionDuration as "interval N <unit>"; default 1 week. */
static int64_t retention_ms(const mcdc_delta_snapshot *s) {
    const int64_t week = 7LL * 24 * 3600 * 1000;
    const char *v = mcdc_delta_snapshot_config(s, "delta.deletedFileRetentionDuration");
    if (v == NULL) return week;
    long long n;
    char unit[16];
    if (sscanf(v, "interval %lld %15s", &n, unit) != 2 || n < 0) return week;
    static const struct {
        const char *u;
        int64_t ms;
    } units[] = {{"second", 1000}, {"minute", 60000}, {"hour", 3600000}, {"day", 86400000},
                 {"week", 604800000}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strncmp(unit, units[i].u, strlen(units[i].u)) == 0) return n * units[i].ms;
    return week;
}

/* The version _last_checkpoint names (-1: none or unreadable). A keeper of
 * its snapshot (the only writer of its table for the run) reads it once and
 * then remembers what it wrote. */
static int64_t last_checkpoint_version(mcdc_delta_table *t) {
    if (t->keep_snapshot && t->last_checkpoint_known) return t->last_checkpoint;
    delta_last_checkpoint hint;
    return mcdc_delta__last_checkpoint_read(&hint, t->storage, NULL) == MCDC_OK ? hint.version
                                                                                 : -1;
}

int mcdc_delta_checkpoint(mcdc_delta_table *t, int64_t version, mcdc_error *err) {
    /* The cached snapshot when it is at that version (a writer checkpointing
     * what it just committed): no replay of the log. Borrowed then. */
    mcdc_delta_snapshot *s = NULL, *loaded = NULL;
    int rc = MCDC_OK;
    if (t->latest && mcdc_delta_snapshot_version(t->latest) == version) s = t->latest;
    else if ((rc = mcdc_delta_snapshot_load(&loaded, t, version, err)) != MCDC_OK) return rc;
    else s = loaded;
    MCDC_ASSERT(version < 0 || mcdc_delta_snapshot_version(s) == version);
    size_t n_files = mcdc_delta_snapshot_file_count(s);
    size_t n_tomb = mcdc_delta_snapshot_tombstone_count(s);
    size_t cap = 2 + n_files + n_tomb + 64;
    json_t **rows = mcdc_calloc(cap, sizeof *rows);
    size_t n = 0, n_adds = 0;
    bool bad = rows == NULL;
    if (!bad) {
        rows[n++] = wrap("protocol", json_deep_copy(mcdc_delta__snapshot_protocol_json(s)));
        rows[n++] = wrap("metaData", json_deep_copy(mcdc_delta__snapshot_metadata_json(s)));
        bad = rows[0] == NULL || rows[1] == NULL;
    }
    size_t n_txn = bad ? 0 : mcdc_delta__snapshot_txn_count(s);
    for (size_t i = 0; i < n_txn && !bad; i++) {
        const char *app;
        int64_t v, lu;
        mcdc_delta__snapshot_txn(s, i, &app, &v, &lu);
        json_t *tx = json_pack("{s:s,s:I}", "appId", app, "version", (json_int_t)v);
        if (tx && lu >= 0) json_object_set_new(tx, "lastUpdated", json_integer(lu));
        if (n == cap) {
            json_t **nr = mcdc_realloc(rows, (cap *= 2) * sizeof *rows);
            if (nr == NULL) {
                json_decref(tx);
                bad = true;
                break;
            }
            rows = nr;
        }
        bad = (rows[n++] = wrap("txn", tx)) == NULL;
    }
    size_t n_dom = bad ? 0 : mcdc_delta__snapshot_domain_count(s);
    for (size_t i = 0; i < n_dom && !bad; i++) {
        const char *d, *conf;
        bool removed;
        mcdc_delta__snapshot_domain_at(s, i, &d, &conf, &removed);
        if (removed) continue;
        if (n == cap) {
            json_t **nr = mcdc_realloc(rows, (cap *= 2) * sizeof *rows);
            if (nr == NULL) {
                bad = true;
                break;
            }
            rows = nr;
        }
        bad = (rows[n++] = wrap("domainMetadata", json_pack("{s:s,s:s,s:b}", "domain", d,
                                                            "configuration", conf, "removed",
                                                            0))) == NULL;
    }
    int64_t cutoff = mcdc_now_utc_us() / 1000 - retention_ms(s);
    for (size_t i = 0; i < n_files && !bad; i++) {
        if (n == cap) {
            json_t **nr = mcdc_realloc(rows, (cap *= 2) * sizeof *rows);
            if (nr == NULL) {
                bad = true;
                break;
            }
            rows = nr;
        }
        bad = (rows[n++] = file_row(mcdc_delta_snapshot_file(s, i), true)) == NULL;
        n_adds++;
    }
    for (size_t i = 0; i < n_tomb && !bad; i++) {
        const mcdc_delta_file *f = mcdc_delta_snapshot_tombstone(s, i);
        if (f->deletion_timestamp_ms >= 0 && f->deletion_timestamp_ms < cutoff) continue;
        if (n == cap) {
            json_t **nr = mcdc_realloc(rows, (cap *= 2) * sizeof *rows);
            if (nr == NULL) {
                bad = true;
                break;
            }
            rows = nr;
        }
        bad = (rows[n++] = file_row(f, false)) == NULL;
    }
    if (bad) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory building a checkpoint");
    mcdc_buf file = {0};
    file.limit = MCDC_DELTA_COMMIT_BYTES_MAX;
    if (!rc) rc = encode_checkpoint(&file, rows, n, err);
    char key[128];
    snprintf(key, sizeof key, MCDC_DELTA_LOG_DIR "/%020lld.checkpoint.parquet",
             (long long)mcdc_delta_snapshot_version(s));
    if (!rc) {
        /* Never replace a checkpoint: a concurrent writer's has the same content. */
        rc = mcdc_storage_put_if_absent(t->storage, key, file.data, file.len, err);
        if (rc == MCDC_E_CONFLICT) rc = MCDC_OK;
    }
    if (!rc) {
        char last[256];
        snprintf(last, sizeof last,
                 "{\"version\":%lld,\"size\":%zu,\"sizeInBytes\":%zu,\"numOfAddFiles\":%zu}",
                 (long long)mcdc_delta_snapshot_version(s), n, file.len, n_adds);
        /* _last_checkpoint only moves forward. */
        if (last_checkpoint_version(t) < mcdc_delta_snapshot_version(s)) {
            rc = mcdc_storage_put(t->storage, MCDC_DELTA_LOG_DIR "/_last_checkpoint", last,
                                  strlen(last), err);
            t->last_checkpoint_known = rc == MCDC_OK;
            t->last_checkpoint = mcdc_delta_snapshot_version(s);
        }
    }
    mcdc_buf_free(&file);
    for (size_t i = 0; rows && i < n; i++) json_decref(rows[i]);
    mcdc_free(rows);
    mcdc_delta_snapshot_free(loaded);
    return rc;
}
