/* mcdc_batch.c - columnar batches in Arrow layout, export and import. */
#include "mcdc_batch.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* ---- buffer pool ----------------------------------------------------------
 * A reader creates a batch, fills it and hands it on; the consumer frees
 * it. Fresh buffers for every batch cost page faults and zeroing in the
 * kernel (the allocator returns large freed blocks to the system) and
 * doubling copies while text columns grow. So a freed batch's columns go
 * back to its schema and the next batch of that schema starts with them,
 * grown to the sizes the data needed. Bounded in batches and bytes. */
#define MCDC_BATCH_POOL_BATCHES 2
#define MCDC_BATCH_POOL_BYTES_MAX (64u * 1024u * 1024u)

typedef struct mcdc_batch_pool {
    pthread_mutex_t mu;
    int n;
    mcdc_column *cols[MCDC_BATCH_POOL_BATCHES]; /* owned, schema->n_fields each */
    int64_t bytes[MCDC_BATCH_POOL_BATCHES];
} mcdc_batch_pool;

static void col_free(mcdc_column *c);
static void cols_free(mcdc_column *cols, int32_t n) {
    if (cols == NULL) return;
    for (int32_t i = 0; i < n; i++) col_free(&cols[i]);
    mcdc_free(cols);
}
static void pool_drain(mcdc_schema *s) {
    mcdc_batch_pool *p = s->pool;
    if (p == NULL) return;
    for (int i = 0; i < p->n; i++) cols_free(p->cols[i], s->n_fields);
    p->n = 0;
}
static void pool_free(mcdc_schema *s) {
    if (s->pool == NULL) return;
    pool_drain(s);
    pthread_mutex_destroy(&s->pool->mu);
    mcdc_free(s->pool);
    s->pool = NULL;
}

/* ---- schema ------------------------------------------------------------- */
int mcdc_schema_create(mcdc_schema **out, int32_t n_fields, mcdc_error *err) {
    MCDC_ASSERT(out != NULL);
    *out = NULL;
    if (n_fields < 0 || n_fields > MCDC_COLUMNS_MAX)
        return mcdc_error_set(err, MCDC_E_LIMIT, "a schema of %d fields exceeds the limit of %d",
                              (int)n_fields, MCDC_COLUMNS_MAX);
    mcdc_schema *s = mcdc_calloc(1, sizeof *s);
    if (s == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory creating a schema");
    s->fields = mcdc_calloc((size_t)(n_fields ? n_fields : 1), sizeof *s->fields);
    if (s->fields == NULL) {
        mcdc_free(s);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory creating a schema");
    }
    s->n_fields = n_fields;
    s->refs = 1;
    *out = s;
    return MCDC_OK;
}

int mcdc_schema_set(mcdc_schema *s, int32_t i, const char *name, mcdc_type_id type,
                    int32_t precision, int32_t scale, int32_t byte_width, bool nullable,
                    mcdc_error *err) {
    MCDC_ASSERT(s != NULL && i >= 0 && i < s->n_fields && name != NULL);
    if (type == MCDC_TYPE_DECIMAL && (precision < 1 || precision > 38 || scale < 0 ||
                                      scale > precision))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "column '%s': decimal(%d,%d) is not valid (precision 1-38, "
                              "0 <= scale <= precision)",
                              name, (int)precision, (int)scale);
    if (type == MCDC_TYPE_FIXED_BINARY && (byte_width < 1 || byte_width > 8000))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "column '%s': fixed binary width %d is not in 1..8000", name,
                              (int)byte_width);
    char *copy = mcdc_strdup(name);
    if (copy == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    mcdc_field *f = &s->fields[i];
    pool_drain(s); /* pooled buffers were sized for the old field */
    mcdc_free(f->name);
    f->name = copy;
    f->type = type;
    f->precision = type == MCDC_TYPE_DECIMAL ? precision : 0;
    f->scale = type == MCDC_TYPE_DECIMAL ? scale : 0;
    f->byte_width = type == MCDC_TYPE_FIXED_BINARY ? byte_width : 0;
    f->nullable = nullable;
    return MCDC_OK;
}

mcdc_schema *mcdc_schema_ref(mcdc_schema *s) {
    MCDC_ASSERT(s != NULL && __atomic_load_n(&s->refs, __ATOMIC_ACQUIRE) > 0);
    __atomic_add_fetch(&s->refs, 1, __ATOMIC_ACQ_REL);
    return s;
}

void mcdc_schema_unref(mcdc_schema *s) {
    if (s == NULL) return;
    MCDC_ASSERT(__atomic_load_n(&s->refs, __ATOMIC_ACQUIRE) > 0);
    if (__atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    pool_free(s);
    for (int32_t i = 0; i < s->n_fields; i++) mcdc_free(s->fields[i].name);
    mcdc_free(s->fields);
    mcdc_free(s);
}

int32_t mcdc_schema_find(const mcdc_schema *s, const char *name) {
    for (int32_t i = 0; i < s->n_fields; i++)
        if (s->fields[i].name && strcmp(s->fields[i].name, name) == 0) return i;
    return -1;
}

void mcdc_field_format(const mcdc_field *f, char out[32]) {
    switch (f->type) {
    case MCDC_TYPE_BOOL: snprintf(out, 32, "b"); break;
    case MCDC_TYPE_INT8: snprintf(out, 32, "c"); break;
    case MCDC_TYPE_INT16: snprintf(out, 32, "s"); break;
    case MCDC_TYPE_INT32: snprintf(out, 32, "i"); break;
    case MCDC_TYPE_INT64: snprintf(out, 32, "l"); break;
    case MCDC_TYPE_FLOAT: snprintf(out, 32, "f"); break;
    case MCDC_TYPE_DOUBLE: snprintf(out, 32, "g"); break;
    case MCDC_TYPE_DECIMAL: snprintf(out, 32, "d:%d,%d", (int)f->precision, (int)f->scale); break;
    case MCDC_TYPE_UTF8: snprintf(out, 32, "u"); break;
    case MCDC_TYPE_BINARY: snprintf(out, 32, "z"); break;
    case MCDC_TYPE_FIXED_BINARY: snprintf(out, 32, "w:%d", (int)f->byte_width); break;
    case MCDC_TYPE_DATE32: snprintf(out, 32, "tdD"); break;
    case MCDC_TYPE_TIMESTAMP_NTZ: snprintf(out, 32, "tsu:"); break;
    case MCDC_TYPE_TIMESTAMP_UTC: snprintf(out, 32, "tsu:UTC"); break;
    default: MCDC_UNREACHABLE();
    }
}

const char *mcdc_type_name(mcdc_type_id t) {
    switch (t) {
    case MCDC_TYPE_BOOL: return "boolean";
    case MCDC_TYPE_INT8: return "tinyint";
    case MCDC_TYPE_INT16: return "smallint";
    case MCDC_TYPE_INT32: return "int";
    case MCDC_TYPE_INT64: return "bigint";
    case MCDC_TYPE_FLOAT: return "float";
    case MCDC_TYPE_DOUBLE: return "double";
    case MCDC_TYPE_DECIMAL: return "decimal";
    case MCDC_TYPE_UTF8: return "string";
    case MCDC_TYPE_BINARY: return "binary";
    case MCDC_TYPE_FIXED_BINARY: return "fixed binary";
    case MCDC_TYPE_DATE32: return "date";
    case MCDC_TYPE_TIMESTAMP_NTZ: return "timestamp_ntz";
    case MCDC_TYPE_TIMESTAMP_UTC: return "timestamp";
    }
    return "?";
}

int32_t mcdc_type_width(const mcdc_field *f) {
    switch (f->type) {
    case MCDC_TYPE_BOOL: return 0;
    case MCDC_TYPE_INT8: return 1;
    case MCDC_TYPE_INT16: return 2;
    case MCDC_TYPE_INT32:
    case MCDC_TYPE_FLOAT:
    case MCDC_TYPE_DATE32: return 4;
    case MCDC_TYPE_INT64:
    case MCDC_TYPE_DOUBLE:
    case MCDC_TYPE_TIMESTAMP_NTZ:
    case MCDC_TYPE_TIMESTAMP_UTC: return 8;
    case MCDC_TYPE_DECIMAL: return 16;
    case MCDC_TYPE_FIXED_BINARY: return f->byte_width;
    case MCDC_TYPE_UTF8:
    case MCDC_TYPE_BINARY: return 0;
    default: MCDC_UNREACHABLE();
    }
}

static bool is_var(const mcdc_field *f) {
    return f->type == MCDC_TYPE_UTF8 || f->type == MCDC_TYPE_BINARY;
}

/* ---- batch -------------------------------------------------------------- */
static int64_t value_bytes(const mcdc_field *f, int64_t rows) {
    if (f->type == MCDC_TYPE_BOOL) return (rows + 7) / 8;
    return (int64_t)mcdc_type_width(f) * rows;
}

/* Grows the row-indexed buffers of c to hold `rows` rows. */
static int col_grow_rows(mcdc_column *c, int64_t rows, mcdc_error *err) {
    if (rows <= c->capacity) return MCDC_OK;
    int64_t cap = c->capacity ? c->capacity : 64;
    while (cap < rows) cap *= 2;
    const mcdc_field *f = c->field;
    if (value_bytes(f, cap) > (int64_t)MCDC_BATCH_BYTES_MAX)
        return mcdc_error_set(err, MCDC_E_LIMIT,
                              "column '%s': %lld rows exceed the batch limit of %u bytes",
                              f->name, (long long)cap, MCDC_BATCH_BYTES_MAX);
    if (is_var(f)) {
        int32_t *o = mcdc_realloc(c->offsets, (size_t)(cap + 1) * sizeof *o);
        if (o == NULL) goto nomem;
        if (c->offsets == NULL) o[0] = 0;
        c->offsets = o;
    } else {
        size_t old = (size_t)value_bytes(f, c->capacity), nb = (size_t)value_bytes(f, cap);
        uint8_t *v = mcdc_realloc(c->values, nb ? nb : 1);
        if (v == NULL) goto nomem;
        memset(v + old, 0, nb - old);
        c->values = v;
    }
    if (c->validity) {
        size_t old = (size_t)(c->capacity + 7) / 8, nb = (size_t)(cap + 7) / 8;
        uint8_t *v = mcdc_realloc(c->validity, nb);
        if (v == NULL) goto nomem;
        memset(v + old, 0xff, nb - old);
        c->validity = v;
    }
    c->capacity = cap;
    return MCDC_OK;
nomem:
    return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory growing column '%s' to %lld rows",
                          f->name, (long long)cap);
}

int mcdc_col_reserve(mcdc_column *c, int64_t rows, int64_t bytes, mcdc_error *err) {
    MCDC_ASSERT(rows >= 0 && bytes >= 0);
    int rc = col_grow_rows(c, c->length + rows, err);
    if (rc) return rc;
    if (is_var(c->field) && c->data_len + bytes > c->data_cap) {
        int64_t need = c->data_len + bytes;
        if (need > (int64_t)MCDC_BATCH_BYTES_MAX || need > INT32_MAX)
            return mcdc_error_set(err, MCDC_E_LIMIT,
                                  "column '%s': %lld bytes of values exceed the batch limit",
                                  c->field->name, (long long)need);
        int64_t cap = c->data_cap ? c->data_cap : 256;
        while (cap < need) cap *= 2;
        if (cap > (int64_t)MCDC_BATCH_BYTES_MAX) cap = (int64_t)MCDC_BATCH_BYTES_MAX;
        uint8_t *d = mcdc_realloc(c->data, (size_t)cap);
        if (d == NULL)
            return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory for column '%s' values",
                                  c->field->name);
        c->data = d;
        c->data_cap = cap;
    }
    return MCDC_OK;
}

/* Bytes held by a column's buffers (their capacity). */
static int64_t col_cap_bytes(const mcdc_column *c) {
    int64_t n = c->validity ? (c->capacity + 7) / 8 : 0;
    if (c->values) n += value_bytes(c->field, c->capacity);
    if (c->offsets) n += (c->capacity + 1) * 4;
    return n + (c->data ? c->data_cap : 0);
}

/* Columns of a freed batch of schema s, emptied as a new batch's are, or
 * NULL. Thread-safe. */
static mcdc_column *pool_take(mcdc_schema *s) {
    mcdc_batch_pool *p = __atomic_load_n(&s->pool, __ATOMIC_ACQUIRE);
    if (p == NULL) return NULL;
    mcdc_column *cols = NULL;
    pthread_mutex_lock(&p->mu);
    if (p->n > 0) cols = p->cols[--p->n];
    pthread_mutex_unlock(&p->mu);
    return cols;
}

/* Keeps b's columns for the schema's next batch; false when the pool is
 * full or they hold too little or too much. Thread-safe. */
static bool pool_put(mcdc_batch *b) {
    mcdc_schema *s = b->schema;
    int64_t bytes = 0;
    for (int32_t i = 0; i < s->n_fields; i++) {
        const mcdc_column *c = &b->columns[i];
        /* only whole columns (one never grown holds no buffers to keep) */
        if (c->capacity == 0 || (is_var(c->field) ? c->offsets == NULL : c->values == NULL))
            return false;
        bytes += col_cap_bytes(c);
    }
    if (bytes == 0 || bytes > (int64_t)MCDC_BATCH_POOL_BYTES_MAX) return false;
    mcdc_batch_pool *p = __atomic_load_n(&s->pool, __ATOMIC_ACQUIRE);
    if (p == NULL) {
        mcdc_batch_pool *np = mcdc_calloc(1, sizeof *np);
        if (np == NULL) return false;
        if (pthread_mutex_init(&np->mu, NULL) != 0) {
            mcdc_free(np);
            return false;
        }
        if (__atomic_compare_exchange_n(&s->pool, &p, np, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            p = np;
        } else { /* another thread installed one: p is it */
            pthread_mutex_destroy(&np->mu);
            mcdc_free(np);
        }
    }
    /* Emptied here, outside the lock: as mcdc_batch_create leaves them.
     * Validity goes (NULL until a first null). */
    for (int32_t i = 0; i < s->n_fields; i++) {
        mcdc_column *c = &b->columns[i];
        mcdc_free(c->validity);
        c->validity = NULL;
        c->length = c->null_count = c->data_len = 0;
        if (c->offsets) c->offsets[0] = 0;
        if (c->values && c->field->type == MCDC_TYPE_BOOL)
            memset(c->values, 0, (size_t)(c->capacity + 7) / 8);
    }
    bool kept = false;
    int64_t total = bytes;
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->n; i++) total += p->bytes[i];
    if (p->n < MCDC_BATCH_POOL_BATCHES && total <= (int64_t)MCDC_BATCH_POOL_BYTES_MAX) {
        p->cols[p->n] = b->columns;
        p->bytes[p->n] = bytes;
        p->n++;
        kept = true;
    }
    pthread_mutex_unlock(&p->mu);
    return kept;
}

int mcdc_batch_create(mcdc_batch **out, mcdc_schema *schema, int64_t capacity_rows,
                      mcdc_error *err) {
    MCDC_ASSERT(out != NULL && schema != NULL && capacity_rows >= 0);
    *out = NULL;
    mcdc_batch *b = mcdc_calloc(1, sizeof *b);
    if (b == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory creating a batch");
    b->columns = pool_take(schema);
    if (b->columns == NULL)
        b->columns = mcdc_calloc((size_t)(schema->n_fields ? schema->n_fields : 1),
                                 sizeof *b->columns);
    if (b->columns == NULL) {
        mcdc_free(b);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory creating a batch");
    }
    b->schema = mcdc_schema_ref(schema);
    for (int32_t i = 0; i < schema->n_fields; i++) {
        MCDC_ASSERT(schema->fields[i].name != NULL);
        b->columns[i].field = &schema->fields[i];
        int rc = col_grow_rows(&b->columns[i], capacity_rows ? capacity_rows : 1, err);
        if (rc) {
            mcdc_batch_free(b);
            return rc;
        }
    }
    *out = b;
    return MCDC_OK;
}

static void col_free(mcdc_column *c) {
    mcdc_free(c->validity);
    mcdc_free(c->values);
    mcdc_free(c->offsets);
    mcdc_free(c->data);
}

/* A widened batch as it was created (b->created): the added columns
 * freed, the others back on their own fields, so that its columns can go
 * to the pool its producer takes from. */
static void unwiden(mcdc_batch *b) {
    mcdc_schema *s = b->created;
    b->created = NULL;
    int32_t n = s->n_fields;
    MCDC_ASSERT(b->schema->n_fields >= n);
    for (int32_t i = n; b->columns && i < b->schema->n_fields; i++) col_free(&b->columns[i]);
    for (int32_t i = 0; b->columns && i < n; i++) b->columns[i].field = &s->fields[i];
    mcdc_schema_unref(b->schema);
    b->schema = s; /* the reference moves */
}

void mcdc_batch_free(mcdc_batch *b) {
    if (b == NULL) return;
    if (b->created && b->schema) unwiden(b);
    if (b->columns && b->schema && !pool_put(b)) cols_free(b->columns, b->schema->n_fields);
    else if (b->columns && !b->schema) mcdc_free(b->columns);
    mcdc_schema_unref(b->schema);
    mcdc_free(b);
}

void mcdc_batch_reset(mcdc_batch *b) {
    for (int32_t i = 0; i < b->schema->n_fields; i++) {
        mcdc_column *c = &b->columns[i];
        c->length = c->null_count = c->data_len = 0;
        if (c->validity) memset(c->validity, 0xff, (size_t)(c->capacity + 7) / 8);
        if (c->values && c->field->type == MCDC_TYPE_BOOL)
            memset(c->values, 0, (size_t)(c->capacity + 7) / 8);
    }
    b->rows = 0;
}

int mcdc_batch_seal(mcdc_batch *b, mcdc_error *err) {
    int64_t rows = b->schema->n_fields ? b->columns[0].length : 0;
    for (int32_t i = 1; i < b->schema->n_fields; i++)
        if (b->columns[i].length != rows)
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "column '%s' holds %lld values, column '%s' %lld",
                                  b->columns[i].field->name, (long long)b->columns[i].length,
                                  b->columns[0].field->name, (long long)rows);
    b->rows = rows;
    return MCDC_OK;
}

int64_t mcdc_bits_unset(const uint8_t *bits, int64_t n) {
    MCDC_ASSERT(n >= 0 && (n == 0 || bits != NULL));
    int64_t set = 0, words = n >> 6, at = 0;
    for (int64_t w = 0; w < words; w++, at += 8) {
        uint64_t v;
        memcpy(&v, bits + at, 8);
        set += __builtin_popcountll(v);
    }
    for (int64_t byte = at, full = n >> 3; byte < full; byte++) set += __builtin_popcount(bits[byte]);
    if (n & 7) set += __builtin_popcount((unsigned)bits[n >> 3] & ((1u << (n & 7)) - 1));
    MCDC_ASSERT(set <= n);
    return n - set;
}

/* Every check a pass over a column's buffers, without a branch a row: the
 * NULLs counted from the bitmap a word at a time, the offsets' order
 * folded into one flag (the row is looked for only when it fails). */
int mcdc_batch_validate(const mcdc_batch *b, mcdc_error *err) {
    for (int32_t i = 0; i < b->schema->n_fields; i++) {
        const mcdc_column *c = &b->columns[i];
        const char *n = c->field->name;
        if (c->length != b->rows)
            return mcdc_error_set(err, MCDC_E_INVALID, "column '%s': %lld values, batch %lld", n,
                                  (long long)c->length, (long long)b->rows);
        int64_t nulls = c->validity ? mcdc_bits_unset(c->validity, c->length) : 0;
        if (nulls != c->null_count)
            return mcdc_error_set(err, MCDC_E_INVALID, "column '%s': null count %lld, bitmap %lld",
                                  n, (long long)c->null_count, (long long)nulls);
        if (!c->field->nullable && nulls)
            return mcdc_error_set(err, MCDC_E_INVALID, "column '%s' is NOT NULL but holds %lld nulls",
                                  n, (long long)nulls);
        if (is_var(c->field)) {
            if (c->offsets[0] != 0)
                return mcdc_error_set(err, MCDC_E_INVALID, "column '%s': first offset not 0", n);
            const int32_t *o = c->offsets;
            int down = 0;
            int64_t r = 0;
            /* eight rows a step: gcc -O2 turns the inner fold into vector compares */
            for (; r + 8 <= c->length; r += 8)
                for (int k = 0; k < 8; k++) down |= o[r + k + 1] < o[r + k];
            for (; r < c->length; r++) down |= o[r + 1] < o[r];
            for (r = 0; down && r < c->length; r++)
                if (o[r + 1] < o[r])
                    return mcdc_error_set(err, MCDC_E_INVALID,
                                          "column '%s': offsets decrease at row %lld", n,
                                          (long long)r);
            if (c->offsets[c->length] != c->data_len)
                return mcdc_error_set(err, MCDC_E_INVALID, "column '%s': last offset %d, data %lld",
                                      n, c->offsets[c->length], (long long)c->data_len);
        }
    }
    return MCDC_OK;
}

int64_t mcdc_batch_bytes(const mcdc_batch *b) {
    int64_t total = 0;
    for (int32_t i = 0; i < b->schema->n_fields; i++) {
        const mcdc_column *c = &b->columns[i];
        total += is_var(c->field) ? c->data_len + 4 * c->length : value_bytes(c->field, c->length);
    }
    return total;
}

int64_t mcdc_batch_cap_bytes(const mcdc_batch *b) {
    int64_t total = 0;
    for (int32_t i = 0; i < b->schema->n_fields; i++) total += col_cap_bytes(&b->columns[i]);
    return total;
}

void mcdc_batch_shrink(mcdc_batch *b) {
    for (int32_t i = 0; i < b->schema->n_fields; i++) {
        mcdc_column *c = &b->columns[i];
        int64_t rows = c->length;
        if (rows == 0) continue; /* an empty column's buffers are the next rows' */
        if (rows < c->capacity) {
            /* each buffer holds at least `rows` rows after it, shrunk or not */
            if (is_var(c->field)) {
                int32_t *o = mcdc_realloc(c->offsets, (size_t)(rows + 1) * sizeof *o);
                if (o) c->offsets = o;
            } else {
                uint8_t *v = mcdc_realloc(c->values, (size_t)value_bytes(c->field, rows));
                if (v) c->values = v;
            }
            if (c->validity) {
                uint8_t *v = mcdc_realloc(c->validity, (size_t)(rows + 7) / 8);
                if (v) c->validity = v;
            }
            c->capacity = rows;
        }
        if (c->data && c->data_len > 0 && c->data_len < c->data_cap) {
            uint8_t *d = mcdc_realloc(c->data, (size_t)c->data_len);
            if (d) c->data = d, c->data_cap = c->data_len;
        }
    }
}

/* ---- appending ---------------------------------------------------------- */
/* Gives c a validity bitmap, every row valid, when it has none yet (a
 * column without one has no NULLs). */
static int ensure_validity(mcdc_column *c, mcdc_error *err) {
    if (c->validity) return MCDC_OK;
    size_t nb = (size_t)(c->capacity + 7) / 8;
    if ((c->validity = mcdc_malloc(nb)) == NULL)
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    memset(c->validity, 0xff, nb);
    return MCDC_OK;
}

int mcdc_col_ensure_validity(mcdc_column *c, mcdc_error *err) { return ensure_validity(c, err); }

static int ensure_one(mcdc_column *c, mcdc_error *err) {
    if (c->length < c->capacity) return MCDC_OK;
    return col_grow_rows(c, c->length + 1, err);
}

int mcdc_col_append_null(mcdc_column *c, mcdc_error *err) {
    int rc = ensure_one(c, err);
    if (rc == MCDC_OK) rc = ensure_validity(c, err);
    if (rc) return rc;
    int64_t i = c->length;
    c->validity[i >> 3] &= (uint8_t) ~(1u << (i & 7));
    if (is_var(c->field)) {
        c->offsets[i + 1] = c->offsets[i];
    } else if (c->field->type != MCDC_TYPE_BOOL) {
        int32_t w = mcdc_type_width(c->field);
        memset(c->values + i * w, 0, (size_t)w);
    }
    c->length++;
    c->null_count++;
    return MCDC_OK;
}

int mcdc_col_append_bool(mcdc_column *c, bool v, mcdc_error *err) {
    MCDC_ASSERT(c->field->type == MCDC_TYPE_BOOL);
    int rc = ensure_one(c, err);
    if (rc) return rc;
    int64_t i = c->length;
    if (v)
        c->values[i >> 3] |= (uint8_t)(1u << (i & 7));
    else
        c->values[i >> 3] &= (uint8_t) ~(1u << (i & 7));
    c->length++;
    return MCDC_OK;
}

int mcdc_col_append_int(mcdc_column *c, int64_t v, mcdc_error *err) {
    int rc = ensure_one(c, err);
    if (rc) return rc;
    int64_t i = c->length;
    switch (c->field->type) {
    case MCDC_TYPE_INT8: {
        MCDC_ASSERT(v >= INT8_MIN && v <= INT8_MAX);
        int8_t x = (int8_t)v;
        memcpy(c->values + i, &x, 1);
        break;
    }
    case MCDC_TYPE_INT16: {
        MCDC_ASSERT(v >= INT16_MIN && v <= INT16_MAX);
        int16_t x = (int16_t)v;
        memcpy(c->values + i * 2, &x, 2);
        break;
    }
    case MCDC_TYPE_INT32:
    case MCDC_TYPE_DATE32: {
        MCDC_ASSERT(v >= INT32_MIN && v <= INT32_MAX);
        int32_t x = (int32_t)v;
        memcpy(c->values + i * 4, &x, 4);
        break;
    }
    case MCDC_TYPE_INT64:
    case MCDC_TYPE_TIMESTAMP_NTZ:
    case MCDC_TYPE_TIMESTAMP_UTC: memcpy(c->values + i * 8, &v, 8); break;
    default: MCDC_UNREACHABLE();
    }
    c->length++;
    return MCDC_OK;
}

int mcdc_col_append_double(mcdc_column *c, double v, mcdc_error *err) {
    int rc = ensure_one(c, err);
    if (rc) return rc;
    int64_t i = c->length;
    if (c->field->type == MCDC_TYPE_FLOAT) {
        float x = (float)v;
        memcpy(c->values + i * 4, &x, 4);
    } else {
        MCDC_ASSERT(c->field->type == MCDC_TYPE_DOUBLE);
        memcpy(c->values + i * 8, &v, 8);
    }
    c->length++;
    return MCDC_OK;
}

int mcdc_col_append_decimal(mcdc_column *c, uint64_t lo, int64_t hi, mcdc_error *err) {
    MCDC_ASSERT(c->field->type == MCDC_TYPE_DECIMAL);
    int rc = ensure_one(c, err);
    if (rc) return rc;
    memcpy(c->values + c->length * 16, &lo, 8);
    memcpy(c->values + c->length * 16 + 8, &hi, 8);
    c->length++;
    return MCDC_OK;
}

int mcdc_col_append_bytes(mcdc_column *c, const void *p, int64_t n, mcdc_error *err) {
    MCDC_ASSERT(n >= 0);
    if (c->field->type == MCDC_TYPE_FIXED_BINARY) {
        if (n != c->field->byte_width)
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "column '%s' holds %d-byte values, got %lld bytes",
                                  c->field->name, (int)c->field->byte_width, (long long)n);
        int rc = ensure_one(c, err);
        if (rc) return rc;
        memcpy(c->values + c->length * n, p, (size_t)n);
        c->length++;
        return MCDC_OK;
    }
    MCDC_ASSERT(is_var(c->field));
    if (n > (int64_t)MCDC_VALUE_BYTES_MAX)
        return mcdc_error_set(err, MCDC_E_LIMIT,
                              "column '%s': a value of %lld bytes exceeds the limit of %u",
                              c->field->name, (long long)n, MCDC_VALUE_BYTES_MAX);
    int rc = mcdc_col_reserve(c, 1, n, err);
    if (rc) return rc;
    if (n) memcpy(c->data + c->data_len, p, (size_t)n);
    c->data_len += n;
    c->offsets[c->length + 1] = (int32_t)c->data_len;
    c->length++;
    return MCDC_OK;
}

/* Clears bits [from, from + n) of v: the partial bytes at the ends by mask,
 * the whole bytes between by memset. */
static void bits_clear(uint8_t *v, int64_t from, int64_t n) {
    int64_t end = from + n;
    while (from < end && (from & 7) != 0) {
        v[from >> 3] &= (uint8_t) ~(1u << (from & 7));
        from++;
    }
    if (end - from >= 8) {
        memset(v + (from >> 3), 0, (size_t)((end - from) >> 3));
        from += (end - from) & ~(int64_t)7;
    }
    for (; from < end; from++) v[from >> 3] &= (uint8_t) ~(1u << (from & 7));
}

/* n NULLs at once, the same cells as n mcdc_col_append_null (a zero value,
 * the offset repeated, BOOL's value bits left as they are): bulk fills of
 * whole batches (the stamp columns of a snapshot, bronze's NULL columns)
 * pay per column, not per cell. */
int mcdc_col_append_nulls(mcdc_column *c, int64_t n, mcdc_error *err) {
    MCDC_ASSERT(n >= 0);
    int rc = col_grow_rows(c, c->length + n, err);
    if (rc != MCDC_OK || n == 0) return rc;
    if ((rc = ensure_validity(c, err)) != MCDC_OK) return rc;
    int64_t i = c->length;
    bits_clear(c->validity, i, n);
    if (is_var(c->field)) {
        int32_t end = c->offsets[i];
        for (int64_t k = 1; k <= n; k++) c->offsets[i + k] = end;
    } else if (c->field->type != MCDC_TYPE_BOOL) {
        size_t w = (size_t)mcdc_type_width(c->field);
        memset(c->values + (size_t)i * w, 0, (size_t)n * w);
    }
    c->length += n;
    c->null_count += n;
    MCDC_ASSERT(c->length <= c->capacity && c->null_count <= c->length);
    return MCDC_OK;
}

/* n copies of v, the cells of n mcdc_col_append_int: the type is looked at
 * once, then one store loop of its width. */
int mcdc_col_fill_int(mcdc_column *c, int64_t v, int64_t n, mcdc_error *err) {
    MCDC_ASSERT(n >= 0);
    int rc = col_grow_rows(c, c->length + n, err);
    if (rc != MCDC_OK || n == 0) return rc;
    uint8_t *d = c->values;
    int64_t i = c->length;
    switch (c->field->type) {
#define FILL(T, IN_RANGE)                                                                     \
    {                                                                                         \
        MCDC_ASSERT(IN_RANGE);                                                                \
        T x = (T)v;                                                                           \
        for (int64_t k = 0; k < n; k++) memcpy(d + (size_t)(i + k) * sizeof x, &x, sizeof x); \
        break;                                                                                \
    }
    case MCDC_TYPE_INT8: FILL(int8_t, v >= INT8_MIN && v <= INT8_MAX)
    case MCDC_TYPE_INT16: FILL(int16_t, v >= INT16_MIN && v <= INT16_MAX)
    case MCDC_TYPE_INT32:
    case MCDC_TYPE_DATE32: FILL(int32_t, v >= INT32_MIN && v <= INT32_MAX)
    case MCDC_TYPE_INT64:
    case MCDC_TYPE_TIMESTAMP_NTZ:
    case MCDC_TYPE_TIMESTAMP_UTC: FILL(int64_t, true)
#undef FILL
    default: MCDC_UNREACHABLE();
    }
    c->length += n; /* validity bits start set: the values are present */
    return MCDC_OK;
}

int mcdc_col_fill_text(mcdc_column *c, const char *text, int64_t rows, mcdc_error *err) {
    MCDC_ASSERT(c->field->type == MCDC_TYPE_UTF8);
    int64_t len = (int64_t)strlen(text);
    int rc = mcdc_col_reserve(c, rows, rows * len, err);
    if (rc != MCDC_OK) return rc;
    /* The text once, then the bytes written so far copied after themselves:
     * log(rows) copies, no work per row but its offset. */
    uint8_t *d = c->data + c->data_len;
    int64_t total = rows * len;
    if (total > 0) memcpy(d, text, (size_t)len);
    for (int64_t have = len; have < total;) {
        int64_t k = have < total - have ? have : total - have;
        memcpy(d + have, d, (size_t)k);
        have += k;
    }
    int32_t *off = c->offsets + c->length + 1;
    int64_t end = c->data_len;
    for (int64_t i = 0; i < rows; i++) {
        end += len;
        off[i] = (int32_t)end;
    }
    c->data_len = end; /* validity bits start set: the values are present */
    c->length += rows;
    return MCDC_OK;
}

static bool same_type(const mcdc_field *a, const mcdc_field *b) {
    return a->type == b->type && a->precision == b->precision && a->scale == b->scale &&
           a->byte_width == b->byte_width;
}

static bool same_field(const mcdc_field *a, const mcdc_field *b) {
    return strcmp(a->name, b->name) == 0 && same_type(a, b);
}

int mcdc_col_copy_value(mcdc_column *dst, const mcdc_column *src, int64_t row, mcdc_error *err) {
    MCDC_ASSERT(row >= 0 && row < src->length);
    if (!same_type(dst->field, src->field))
        return mcdc_error_set(err, MCDC_E_SCHEMA, "column '%s' cannot take values of column '%s': "
                              "the types differ", dst->field->name, src->field->name);
    if (!mcdc_col_is_valid(src, row)) return mcdc_col_append_null(dst, err);
    const mcdc_field *f = src->field;
    if (f->type == MCDC_TYPE_BOOL)
        return mcdc_col_append_bool(dst, (src->values[row >> 3] >> (row & 7)) & 1, err);
    if (is_var(f)) /* a column of empty values may have no data buffer */
        return mcdc_col_append_bytes(dst, src->data ? src->data + src->offsets[row] : (const uint8_t *)"",
                                     src->offsets[row + 1] - src->offsets[row], err);
    int32_t w = mcdc_type_width(f);
    int rc = ensure_one(dst, err);
    if (rc) return rc;
    memcpy(dst->values + dst->length * w, src->values + row * w, (size_t)w);
    dst->length++;
    return MCDC_OK;
}

/* Marks the nulls among n values appended at dst's row `at` (row i's
 * validity from valid(ctx, i)), allocating dst's bitmap on the first. */
typedef bool (*valid_fn)(const void *ctx, int64_t i);
static int append_validity(mcdc_column *dst, int64_t at, int64_t n, valid_fn valid,
                           const void *ctx, mcdc_error *err) {
    int64_t nulls = 0;
    for (int64_t i = 0; i < n; i++) nulls += !valid(ctx, i);
    if (nulls == 0) return MCDC_OK;
    int rc = ensure_validity(dst, err);
    if (rc) return rc;
    for (int64_t i = 0; i < n; i++)
        if (!valid(ctx, i)) dst->validity[(at + i) >> 3] &= (uint8_t) ~(1u << ((at + i) & 7));
    dst->null_count += nulls;
    return MCDC_OK;
}

typedef struct {
    const mcdc_column *src;
    int64_t from;
} range_rows;
static bool range_valid(const void *ctx, int64_t i) {
    const range_rows *t = ctx;
    return mcdc_col_is_valid(t->src, t->from + i);
}

typedef struct {
    const mcdc_column *const *src;
    const int32_t *which, *rows;
} gather_rows;
static bool gather_valid(const void *ctx, int64_t i) {
    const gather_rows *g = ctx;
    return mcdc_col_is_valid(g->src[g->which ? g->which[i] : 0], g->rows[i]);
}

/* The gather: row rows[i] of src[which[i]] (which NULL: of src[0]). */
/* Copies l bytes; most values gathered are short (LSN texts, codes, names):
 * up to 32 bytes go in two overlapping fixed-size pieces, inline, where a
 * call to memcpy per value would cost more than the copy. Reads and writes
 * stay within the l bytes. */
static inline void copy_value(uint8_t *d, const uint8_t *s, size_t l) {
    if (l > 32) memcpy(d, s, l);
    else if (l >= 16) memcpy(d, s, 16), memcpy(d + l - 16, s + l - 16, 16);
    else if (l >= 8) memcpy(d, s, 8), memcpy(d + l - 8, s + l - 8, 8);
    else if (l >= 4) memcpy(d, s, 4), memcpy(d + l - 4, s + l - 4, 4);
    else
        for (size_t i = 0; i < l; i++) d[i] = s[i];
}

/* A gather's rows are mostly scattered over buffers far larger than the
 * cache (a sorter's held rows in key order): each value is a miss. The
 * loops touch the row GATHER_AHEAD places on first, so that its line is
 * loaded while the rows before it are copied: a text's offsets in the pass
 * that sizes the copy, its bytes in the copy. */
#define GATHER_AHEAD 32

static int gather(mcdc_column *dst, const mcdc_column *const *src, const int32_t *which,
                  const int32_t *rows, int64_t n, mcdc_error *err) {
    if (n == 0) return MCDC_OK;
#define SRC(i) src[which ? which[i] : 0]
#define AHEAD(i, expr) \
    do { \
        if ((i) < n) __builtin_prefetch(expr); \
    } while (0)
    const mcdc_field *f = dst->field;
    int64_t bytes = 0;
    bool nulls_possible = false;
    for (int64_t i = 0; i < (which ? n : 1); i++) {
        const mcdc_column *c = SRC(i);
        if (!same_type(f, c->field))
            return mcdc_error_set(err, MCDC_E_SCHEMA, "column '%s' cannot take values of column "
                                  "'%s': the types differ", f->name, c->field->name);
        nulls_possible |= c->validity && c->null_count > 0;
    }
    for (int64_t i = 0; is_var(f) && i < n; i++) {
        AHEAD(i + GATHER_AHEAD, SRC(i + GATHER_AHEAD)->offsets + rows[i + GATHER_AHEAD]);
        bytes += SRC(i)->offsets[rows[i] + 1] - SRC(i)->offsets[rows[i]];
    }
    int rc = mcdc_col_reserve(dst, n, bytes, err);
    if (rc) return rc;
    int64_t at = dst->length;
    gather_rows gr = {src, which, rows};
    if (nulls_possible && (rc = append_validity(dst, at, n, gather_valid, &gr, err)) != MCDC_OK)
        return rc;
    if (f->type == MCDC_TYPE_BOOL) {
        for (int64_t i = 0; i < n; i++) {
            const mcdc_column *c = SRC(i);
            int64_t r = rows[i], d = at + i;
            if ((c->values[r >> 3] >> (r & 7)) & 1) dst->values[d >> 3] |= (uint8_t)(1u << (d & 7));
            else dst->values[d >> 3] &= (uint8_t) ~(1u << (d & 7));
        }
    } else if (is_var(f)) {
        int64_t len = dst->data_len;
        for (int64_t i = 0; i < n; i++) {
            const mcdc_column *c = SRC(i);
            AHEAD(i + GATHER_AHEAD, SRC(i + GATHER_AHEAD)->data +
                                        SRC(i + GATHER_AHEAD)->offsets[rows[i + GATHER_AHEAD]]);
            int32_t o = c->offsets[rows[i]], l = c->offsets[rows[i] + 1] - o;
            copy_value(dst->data + len, c->data + o, (size_t)l);
            len += l;
            dst->offsets[at + i + 1] = (int32_t)len;
        }
        dst->data_len = len;
    } else {
        int32_t w = mcdc_type_width(f);
        uint8_t *out = dst->values + at * w;
#define FIXED(W)                                                                           \
    for (int64_t i = 0; i < n; i++) {                                                      \
        AHEAD(i + GATHER_AHEAD,                                                            \
              SRC(i + GATHER_AHEAD)->values + (int64_t)rows[i + GATHER_AHEAD] * (W));      \
        memcpy(out + i * (W), SRC(i)->values + (int64_t)rows[i] * (W), (size_t)(W));       \
    }
        if (w == 8) FIXED(8)
        else if (w == 4) FIXED(4)
        else FIXED(w)
#undef FIXED
    }
#undef AHEAD
#undef SRC
    dst->length = at + n;
    return MCDC_OK;
}

int mcdc_col_take(mcdc_column *dst, const mcdc_column *src, const int32_t *idx, int64_t n,
                  mcdc_error *err) {
    return gather(dst, &src, NULL, idx, n, err);
}

int mcdc_col_gather(mcdc_column *dst, const mcdc_column *const *src, const int32_t *which,
                    const int32_t *rows, int64_t n, mcdc_error *err) {
    return gather(dst, src, which, rows, n, err);
}

int mcdc_col_take_range(mcdc_column *dst, const mcdc_column *src, int64_t from, int64_t n,
                        mcdc_error *err) {
    if (!same_type(dst->field, src->field))
        return mcdc_error_set(err, MCDC_E_SCHEMA, "column '%s' cannot take values of column '%s': "
                              "the types differ", dst->field->name, src->field->name);
    MCDC_ASSERT(from >= 0 && n >= 0 && from + n <= src->length);
    if (n == 0) return MCDC_OK;
    const mcdc_field *f = src->field;
    int64_t bytes = is_var(f) ? src->offsets[from + n] - src->offsets[from] : 0;
    int rc = mcdc_col_reserve(dst, n, bytes, err);
    if (rc) return rc;
    int64_t at = dst->length;
    range_rows tr = {src, from};
    if (src->validity && src->null_count > 0 &&
        (rc = append_validity(dst, at, n, range_valid, &tr, err)) != MCDC_OK)
        return rc;
    if (f->type == MCDC_TYPE_BOOL) {
        for (int64_t i = 0; i < n; i++) {
            int64_t r = from + i, d = at + i;
            if ((src->values[r >> 3] >> (r & 7)) & 1) dst->values[d >> 3] |= (uint8_t)(1u << (d & 7));
            else dst->values[d >> 3] &= (uint8_t) ~(1u << (d & 7));
        }
    } else if (is_var(f)) {
        int32_t base = src->offsets[from];
        /* A range of empty texts may have no data buffer on either side
         * (memcpy of NULL is undefined even for 0 bytes). */
        if (bytes > 0) memcpy(dst->data + dst->data_len, src->data + base, (size_t)bytes);
        int32_t shift = (int32_t)dst->data_len - base;
        for (int64_t i = 1; i <= n; i++) dst->offsets[at + i] = src->offsets[from + i] + shift;
        dst->data_len += bytes;
    } else {
        int32_t w = mcdc_type_width(f);
        memcpy(dst->values + at * w, src->values + from * w, (size_t)(n * w));
    }
    dst->length = at + n;
    return MCDC_OK;
}

int mcdc_batch_widen(mcdc_batch *b, mcdc_schema *wider, mcdc_error *err) {
    int32_t n = b->schema->n_fields;
    if (wider->n_fields < n)
        return mcdc_error_set(err, MCDC_E_INVALID, "cannot widen a batch of %d columns to %d",
                              (int)n, (int)wider->n_fields);
    for (int32_t i = 0; i < n; i++)
        if (!same_field(&b->schema->fields[i], &wider->fields[i]))
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "cannot widen: column %d is '%s' in the batch, '%s' in the schema",
                                  (int)i, b->schema->fields[i].name, wider->fields[i].name);
    mcdc_column *cols = mcdc_realloc(b->columns, (size_t)(wider->n_fields ? wider->n_fields : 1) *
                                                     sizeof *cols);
    if (cols == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory widening a batch");
    b->columns = cols;
    memset(cols + n, 0, (size_t)(wider->n_fields - n) * sizeof *cols);
    for (int32_t i = 0; i < wider->n_fields; i++) cols[i].field = &wider->fields[i];
    /* the first widening keeps the schema the batch was created with (its
     * reference moves to b->created): the columns return to its pool */
    if (b->created == NULL && wider != b->schema) b->created = b->schema;
    else mcdc_schema_unref(b->schema);
    b->schema = mcdc_schema_ref(wider);
    int rc = MCDC_OK;
    for (int32_t i = n; i < wider->n_fields && rc == MCDC_OK; i++)
        rc = col_grow_rows(&cols[i], b->rows ? b->rows : 1, err);
    return rc;
}

int mcdc_col_move(mcdc_column *dst, mcdc_column *src, mcdc_error *err) {
    if (!same_type(dst->field, src->field))
        return mcdc_error_set(err, MCDC_E_SCHEMA, "column '%s' (%s) cannot take '%s' (%s)",
                              dst->field->name, mcdc_type_name(dst->field->type), src->field->name,
                              mcdc_type_name(src->field->type));
    const mcdc_field *f = dst->field, *sf = src->field;
    col_free(dst);
    *dst = *src;
    dst->field = f;
    memset(src, 0, sizeof *src);
    src->field = sf;
    return MCDC_OK;
}

int mcdc_batch_reshape(mcdc_batch **out, mcdc_batch *in, mcdc_schema *target, const int32_t *from,
                       mcdc_error *err) {
    *out = NULL;
    int32_t n = target->n_fields;
    int rc = MCDC_OK;
    for (int32_t i = 0; i < n && rc == MCDC_OK; i++) {
        if (from[i] < 0) continue;
        if (from[i] >= in->schema->n_fields ||
            !same_type(&in->schema->fields[from[i]], &target->fields[i]))
            rc = mcdc_error_set(err, MCDC_E_SCHEMA,
                                "column '%s' has another type in the data than in the table",
                                target->fields[i].name);
        for (int32_t j = 0; j < i && rc == MCDC_OK; j++)
            if (from[j] == from[i])
                rc = mcdc_error_set(err, MCDC_E_INVALID, "column %d taken twice", (int)from[i]);
    }
    mcdc_batch *b = NULL;
    if (rc == MCDC_OK) rc = mcdc_batch_create(&b, target, in->rows ? in->rows : 1, err);
    for (int32_t i = 0; i < n && rc == MCDC_OK; i++) {
        mcdc_column *dst = &b->columns[i];
        if (from[i] < 0) {
            rc = mcdc_col_append_nulls(dst, in->rows, err);
            continue;
        }
        rc = mcdc_col_move(dst, &in->columns[from[i]], err); /* types checked above */
    }
    int64_t rows = in->rows;
    mcdc_batch_free(in); /* its moved-out columns are empty: nothing pooled twice */
    if (rc == MCDC_OK) rc = mcdc_batch_seal(b, err);
    MCDC_ASSERT(rc != MCDC_OK || b->rows == rows);
    if (rc) {
        mcdc_batch_free(b);
        return rc;
    }
    *out = b;
    return MCDC_OK;
}

/* ---- Arrow export --------------------------------------------------------
 * The exported arrays (the struct and one per column) point into the
 * batch's own buffers and share it: each holds one reference, and the last
 * released frees the batch, which gives its columns back to the schema's
 * pool for the producer's next batch (a consumer may release a moved child
 * after its parent, on another thread). */
typedef struct {
    mcdc_batch *batch; /* NULL while export fails: the caller keeps it */
    int refs;          /* arrays not yet released; atomic */
} export_hold;

typedef struct {
    const void *buffers[3];
    export_hold *hold;
    struct ArrowArray **children;
    int64_t n_children;
} array_priv;

static void hold_drop(export_hold *h) {
    if (__atomic_sub_fetch(&h->refs, 1, __ATOMIC_ACQ_REL) > 0) return;
    mcdc_batch_free(h->batch);
    mcdc_free(h);
}

static void array_release(struct ArrowArray *a) {
    if (a == NULL || a->release == NULL) return;
    array_priv *p = a->private_data;
    for (int64_t i = 0; i < p->n_children; i++) {
        struct ArrowArray *ch = p->children[i];
        if (ch->release) ch->release(ch);
        mcdc_free(ch);
    }
    mcdc_free(p->children);
    hold_drop(p->hold);
    mcdc_free(p);
    a->release = NULL;
}

typedef struct {
    char format[32];
    char *name;
    struct ArrowSchema **children;
    int64_t n_children;
} schema_priv;

static void schema_release(struct ArrowSchema *s) {
    if (s == NULL || s->release == NULL) return;
    schema_priv *p = s->private_data;
    for (int64_t i = 0; i < p->n_children; i++) {
        struct ArrowSchema *ch = p->children[i];
        if (ch->release) ch->release(ch);
        mcdc_free(ch);
    }
    mcdc_free(p->children);
    mcdc_free(p->name);
    mcdc_free(p);
    s->release = NULL;
}

static int schema_fill(struct ArrowSchema *out, const char *format, const char *name,
                       int64_t flags, int64_t n_children) {
    schema_priv *p = mcdc_calloc(1, sizeof *p);
    if (p == NULL) return MCDC_E_NOMEM;
    snprintf(p->format, sizeof p->format, "%s", format);
    p->name = mcdc_strdup(name ? name : "");
    if (n_children) p->children = mcdc_calloc((size_t)n_children, sizeof *p->children);
    if (p->name == NULL || (n_children && p->children == NULL)) {
        mcdc_free(p->name);
        mcdc_free(p->children);
        mcdc_free(p);
        return MCDC_E_NOMEM;
    }
    *out = (struct ArrowSchema){.format = p->format,
                                .name = p->name,
                                .metadata = NULL,
                                .flags = flags,
                                .n_children = 0,
                                .children = p->children,
                                .dictionary = NULL,
                                .release = schema_release,
                                .private_data = p};
    return MCDC_OK;
}

int mcdc_schema_export(const mcdc_schema *s, struct ArrowSchema *out, mcdc_error *err) {
    int rc = schema_fill(out, "+s", "", 0, s->n_fields);
    if (rc) return mcdc_error_set(err, rc, "out of memory exporting a schema");
    schema_priv *p = out->private_data;
    for (int32_t i = 0; i < s->n_fields; i++) {
        struct ArrowSchema *ch = mcdc_calloc(1, sizeof *ch);
        char fmt[32];
        mcdc_field_format(&s->fields[i], fmt);
        if (ch == NULL || schema_fill(ch, fmt, s->fields[i].name,
                                      s->fields[i].nullable ? ARROW_FLAG_NULLABLE : 0, 0)) {
            mcdc_free(ch);
            out->release(out);
            return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory exporting a schema");
        }
        p->children[i] = ch;
        p->n_children = i + 1;
        out->n_children = i + 1;
    }
    return MCDC_OK;
}

/* A child array on column c's buffers, holding a reference to h. */
static int export_column(const mcdc_column *c, int64_t rows, export_hold *h,
                         struct ArrowArray *out) {
    /* never a NULL data buffer, even for a column of empty values */
    static const uint64_t no_data = 0;
    array_priv *p = mcdc_calloc(1, sizeof *p);
    if (p == NULL) return MCDC_E_NOMEM;
    int64_t nbuf = is_var(c->field) ? 3 : 2;
    p->buffers[0] = c->null_count ? c->validity : NULL;
    if (is_var(c->field)) {
        p->buffers[1] = c->offsets;
        p->buffers[2] = c->data ? (const void *)c->data : &no_data;
    } else {
        p->buffers[1] = c->values;
    }
    p->hold = h;
    __atomic_add_fetch(&h->refs, 1, __ATOMIC_RELAXED);
    *out = (struct ArrowArray){.length = rows,
                               .null_count = c->null_count,
                               .offset = 0,
                               .n_buffers = nbuf,
                               .n_children = 0,
                               .buffers = p->buffers,
                               .children = NULL,
                               .dictionary = NULL,
                               .release = array_release,
                               .private_data = p};
    return MCDC_OK;
}

int mcdc_batch_export(mcdc_batch **bp, struct ArrowArray *out_array,
                      struct ArrowSchema *out_schema, mcdc_error *err) {
    MCDC_ASSERT(bp != NULL && *bp != NULL);
    mcdc_batch *b = *bp;
    int rc = mcdc_batch_validate(b, err);
    if (rc) return rc;
    rc = mcdc_schema_export(b->schema, out_schema, err);
    if (rc) return rc;
    int32_t n = b->schema->n_fields;
    export_hold *h = mcdc_calloc(1, sizeof *h);
    array_priv *p = h ? mcdc_calloc(1, sizeof *p) : NULL;
    if (p) p->children = mcdc_calloc((size_t)(n ? n : 1), sizeof *p->children);
    if (p == NULL || p->children == NULL) {
        if (p) mcdc_free(p->children);
        mcdc_free(p);
        mcdc_free(h);
        goto nomem;
    }
    h->refs = 1; /* the struct array's; each column's adds one */
    p->hold = h;
    *out_array = (struct ArrowArray){.length = b->rows,
                                     .null_count = 0,
                                     .offset = 0,
                                     .n_buffers = 1,
                                     .n_children = n,
                                     .buffers = p->buffers,
                                     .children = p->children,
                                     .dictionary = NULL,
                                     .release = array_release,
                                     .private_data = p};
    for (int32_t i = 0; i < n; i++) {
        struct ArrowArray *ch = mcdc_calloc(1, sizeof *ch);
        if (ch == NULL || export_column(&b->columns[i], b->rows, h, ch)) {
            mcdc_free(ch);
            /* the arrays made so far go; the batch stays the caller's */
            out_array->n_children = p->n_children;
            array_release(out_array);
            goto nomem;
        }
        p->children[i] = ch;
        p->n_children = i + 1;
    }
    MCDC_ASSERT(p->n_children == n && h->refs == n + 1);
    h->batch = b; /* the arrays own it from here */
    *bp = NULL;
    return MCDC_OK;
nomem:
    out_schema->release(out_schema);
    return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory exporting a batch");
}

/* ---- Arrow import (copying) ---------------------------------------------- */
static int type_from_format(const char *fmt, mcdc_type_id *type, int32_t *p, int32_t *s,
                            int32_t *w) {
    *p = *s = *w = 0;
    static const struct {
        const char *f;
        mcdc_type_id t;
    } simple[] = {{"b", MCDC_TYPE_BOOL},   {"c", MCDC_TYPE_INT8},    {"s", MCDC_TYPE_INT16},
                  {"i", MCDC_TYPE_INT32},  {"l", MCDC_TYPE_INT64},   {"f", MCDC_TYPE_FLOAT},
                  {"g", MCDC_TYPE_DOUBLE}, {"u", MCDC_TYPE_UTF8},    {"z", MCDC_TYPE_BINARY},
                  {"tdD", MCDC_TYPE_DATE32}, {"tsu:", MCDC_TYPE_TIMESTAMP_NTZ},
                  {"tsu:UTC", MCDC_TYPE_TIMESTAMP_UTC}, {"tsu:+00:00", MCDC_TYPE_TIMESTAMP_UTC}};
    for (size_t i = 0; i < sizeof simple / sizeof simple[0]; i++)
        if (strcmp(fmt, simple[i].f) == 0) {
            *type = simple[i].t;
            return MCDC_OK;
        }
    int a, b, consumed = 0;
    if (sscanf(fmt, "d:%d,%d%n", &a, &b, &consumed) == 2 && fmt[consumed] == 0) {
        *type = MCDC_TYPE_DECIMAL;
        *p = a;
        *s = b;
        return MCDC_OK;
    }
    if (sscanf(fmt, "w:%d%n", &a, &consumed) == 1 && fmt[consumed] == 0) {
        *type = MCDC_TYPE_FIXED_BINARY;
        *w = a;
        return MCDC_OK;
    }
    return MCDC_E_UNSUPPORTED;
}

static bool arrow_valid(const struct ArrowArray *a, int64_t i) {
    const uint8_t *v = a->buffers[0];
    if (v == NULL || a->null_count == 0) return true;
    int64_t j = i + a->offset;
    return (v[j >> 3] >> (j & 7)) & 1;
}

static int import_column(mcdc_column *c, const struct ArrowArray *a, mcdc_error *err) {
    const mcdc_field *f = c->field;
    int64_t off = a->offset;
    for (int64_t r = 0; r < a->length; r++) {
        int rc;
        if (!arrow_valid(a, r)) {
            rc = mcdc_col_append_null(c, err);
        } else if (f->type == MCDC_TYPE_BOOL) {
            const uint8_t *bits = a->buffers[1];
            int64_t j = r + off;
            rc = mcdc_col_append_bool(c, (bits[j >> 3] >> (j & 7)) & 1, err);
        } else if (is_var(f)) {
            const int32_t *o = a->buffers[1];
            const uint8_t *d = a->buffers[2];
            rc = mcdc_col_append_bytes(c, d + o[r + off], o[r + off + 1] - o[r + off], err);
        } else if (f->type == MCDC_TYPE_FIXED_BINARY) {
            const uint8_t *d = a->buffers[1];
            rc = mcdc_col_append_bytes(c, d + (r + off) * f->byte_width, f->byte_width, err);
        } else {
            int32_t w = mcdc_type_width(f);
            rc = ensure_one(c, err);
            if (rc == MCDC_OK) {
                memcpy(c->values + c->length * w, (const uint8_t *)a->buffers[1] + (r + off) * w,
                       (size_t)w);
                c->length++;
            }
        }
        if (rc) return rc;
    }
    return MCDC_OK;
}

int mcdc_batch_import(mcdc_batch **out, const struct ArrowArray *array,
                      const struct ArrowSchema *schema, mcdc_error *err) {
    MCDC_ASSERT(out != NULL && array != NULL && schema != NULL);
    *out = NULL;
    if (strcmp(schema->format, "+s") != 0 || schema->n_children != array->n_children)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "Arrow import expects a struct array (record batch), got format '%s'",
                              schema->format);
    mcdc_schema *s;
    int rc = mcdc_schema_create(&s, (int32_t)schema->n_children, err);
    if (rc) return rc;
    for (int64_t i = 0; i < schema->n_children; i++) {
        const struct ArrowSchema *cs = schema->children[i];
        mcdc_type_id t;
        int32_t p, sc, w;
        if (type_from_format(cs->format, &t, &p, &sc, &w)) {
            mcdc_schema_unref(s);
            return mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                                  "column '%s': Arrow type '%s' is not supported", cs->name,
                                  cs->format);
        }
        rc = mcdc_schema_set(s, (int32_t)i, cs->name ? cs->name : "", t, p, sc, w,
                             (cs->flags & ARROW_FLAG_NULLABLE) != 0, err);
        if (rc) {
            mcdc_schema_unref(s);
            return rc;
        }
    }
    mcdc_batch *b;
    rc = mcdc_batch_create(&b, s, array->length, err);
    mcdc_schema_unref(s);
    if (rc) return rc;
    for (int64_t i = 0; i < array->n_children && rc == MCDC_OK; i++) {
        const struct ArrowArray *ca = array->children[i];
        if (ca->length < array->length + array->offset - ca->offset) {
            rc = mcdc_error_set(err, MCDC_E_INVALID, "column %lld is shorter than the batch",
                                (long long)i);
            break;
        }
        /* The child's own offset plus the parent's slice. */
        struct ArrowArray view = *ca;
        view.offset = ca->offset + array->offset;
        view.length = array->length;
        rc = import_column(&b->columns[i], &view, err);
    }
    if (rc == MCDC_OK) rc = mcdc_batch_seal(b, err);
    if (rc) {
        mcdc_batch_free(b);
        return rc;
    }
    *out = b;
    return MCDC_OK;
}
