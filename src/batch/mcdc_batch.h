/*
 * mcdc_batch.h - columnar batches in Arrow C Data Interface layout.
 *
 * The one in-memory format of the engine: the reader decodes change rows
 * into it, the Parquet writer encodes from it, the Parquet reader decodes
 * into it, and it leaves (or enters) the library as ArrowArray/ArrowSchema.
 *
 * Buffers follow the Arrow columnar format exactly, so export is a hand-over
 * of pointers, not a copy:
 *   validity   LSB-first bitmap, bit set = value present; NULL while the
 *              column has no null (allocated on the first null)
 *   values     fixed width: bool (bit-packed), int8/16/32/64, float, double,
 *              decimal128 (16-byte LE two's complement), date32 (int32 days),
 *              timestamp (int64 microseconds), fixed binary (size bytes each)
 *   offsets    utf8/binary: int32, length+1 entries, non-decreasing
 *   data       utf8/binary bytes
 *
 * Hot loops append straight into these buffers after mcdc_col_reserve();
 * the helpers below are for convenience, not for per-cell dispatch.
 */
#ifndef MCDC_BATCH_H
#define MCDC_BATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "mcdc_util.h"

typedef enum mcdc_type_id {
    MCDC_TYPE_BOOL = 1,  /* Arrow "b" */
    MCDC_TYPE_INT8,      /* "c" */
    MCDC_TYPE_INT16,     /* "s" */
    MCDC_TYPE_INT32,     /* "i" */
    MCDC_TYPE_INT64,     /* "l" */
    MCDC_TYPE_FLOAT,     /* "f" */
    MCDC_TYPE_DOUBLE,    /* "g" */
    MCDC_TYPE_DECIMAL,   /* "d:p,s" 128-bit, precision 1-38 */
    MCDC_TYPE_UTF8,      /* "u" */
    MCDC_TYPE_BINARY,    /* "z" */
    MCDC_TYPE_FIXED_BINARY, /* "w:n" */
    MCDC_TYPE_DATE32,    /* "tdD" days since 1970-01-01 */
    MCDC_TYPE_TIMESTAMP_NTZ, /* "tsu:" microseconds, no zone (Delta timestamp_ntz) */
    MCDC_TYPE_TIMESTAMP_UTC  /* "tsu:UTC" microseconds since the epoch (Delta timestamp) */
} mcdc_type_id;

typedef struct mcdc_field {
    char *name;          /* owned by the schema, UTF-8 */
    mcdc_type_id type;
    int32_t precision;   /* decimal */
    int32_t scale;       /* decimal */
    int32_t byte_width;  /* fixed binary */
    bool nullable;
} mcdc_field;

/* An ordered list of fields. Reference-counted: batches share their schema.
 * The buffers of freed batches are kept for the schema's next batches (a
 * few, bounded) and released with the schema's last reference. */
typedef struct mcdc_schema {
    int32_t n_fields;
    mcdc_field *fields;  /* owned, n_fields entries */
    int32_t refs;        /* internal */
    struct mcdc_batch_pool *pool; /* internal: columns of freed batches, owned */
} mcdc_schema;

int mcdc_schema_create(mcdc_schema **out, int32_t n_fields, mcdc_error *err);
/* Sets field i (copies name). Fails on a bad precision/scale/width. */
int mcdc_schema_set(mcdc_schema *s, int32_t i, const char *name, mcdc_type_id type,
                    int32_t precision, int32_t scale, int32_t byte_width, bool nullable,
                    mcdc_error *err);
/* Another reference to s (no copy). */
mcdc_schema *mcdc_schema_ref(mcdc_schema *s);
/* Drops a reference; frees on the last. NULL-safe. */
void mcdc_schema_unref(mcdc_schema *s);
/* Index of a field by exact name, or -1. */
int32_t mcdc_schema_find(const mcdc_schema *s, const char *name);
/* Arrow format string of a field ("d:18,4", "tsu:", "w:10"...) into out. */
void mcdc_field_format(const mcdc_field *f, char out[32]);
/* The type's name in messages ("decimal", "timestamp_ntz"...). Static. */
const char *mcdc_type_name(mcdc_type_id t);
/* Bytes per value of a fixed-width type; 0 for utf8/binary; bool = 0 (bits). */
int32_t mcdc_type_width(const mcdc_field *f);

typedef struct mcdc_column {
    const mcdc_field *field; /* borrowed from the batch's schema */
    int64_t length;          /* values appended */
    int64_t null_count;
    int64_t capacity;        /* rows the buffers hold */
    uint8_t *validity;       /* NULL until the first null */
    uint8_t *values;         /* fixed width (bool: bits); NULL for var types */
    int32_t *offsets;        /* var types: capacity+1 entries */
    uint8_t *data;           /* var types */
    int64_t data_len;
    int64_t data_cap;
} mcdc_column;

typedef struct mcdc_batch {
    mcdc_schema *schema;  /* one reference held */
    mcdc_column *columns; /* schema->n_fields */
    int64_t rows;         /* set by mcdc_batch_seal */
    /* The schema the batch was created with, when mcdc_batch_widen has
     * widened it since (one reference held, else NULL): freed, its columns
     * go back to that schema's pool, the one its producer creates from. */
    mcdc_schema *created;
} mcdc_batch;

/* A batch with room for capacity_rows rows in every column (grows on demand,
 * bounded by MCDC_BATCH_BYTES_MAX). Takes a reference to schema. */
int mcdc_batch_create(mcdc_batch **out, mcdc_schema *schema, int64_t capacity_rows,
                      mcdc_error *err);
/* Frees b; its column buffers may be kept (up to MCDC_BATCH_POOL_BATCHES
 * batches per schema) for the next mcdc_batch_create on the same schema,
 * on any thread. NULL-safe. */
void mcdc_batch_free(mcdc_batch *b);
/* Empties every column, keeping buffers for reuse. */
void mcdc_batch_reset(mcdc_batch *b);
/* Checks every column holds the same number of values and records it in
 * b->rows. Call once all values are appended. */
int mcdc_batch_seal(mcdc_batch *b, mcdc_error *err);
/* Full structural validation (lengths, offsets, null counts, bitmaps). */
int mcdc_batch_validate(const mcdc_batch *b, mcdc_error *err);
/* Approximate bytes held by the values (for read_mb and batch limits). */
int64_t mcdc_batch_bytes(const mcdc_batch *b);
/* Bytes its buffers take (their capacities): what holding b costs. */
int64_t mcdc_batch_cap_bytes(const mcdc_batch *b);
/* Gives each column of b buffers of its length, for a batch held long: its
 * slack goes back to the allocator. A buffer that cannot shrink is kept as
 * it is (it is only larger than it needs to be). */
void mcdc_batch_shrink(mcdc_batch *b);

/* ---- appending ---------------------------------------------------------- */
/* Makes room for `rows` more values (and for var types, `bytes` more data
 * bytes). After it, writing values[length..length+rows) is safe. */
int mcdc_col_reserve(mcdc_column *c, int64_t rows, int64_t bytes, mcdc_error *err);
/* Gives c a validity bitmap for its capacity, every row valid, when it has
 * none yet (for code that writes a bitmap straight into it: a frame's). */
int mcdc_col_ensure_validity(mcdc_column *c, mcdc_error *err);
int mcdc_col_append_null(mcdc_column *c, mcdc_error *err);
int mcdc_col_append_bool(mcdc_column *c, bool v, mcdc_error *err);
/* int8/16/32/64, date32 and timestamps: v is narrowed to the column width
 * (asserted to fit). */
int mcdc_col_append_int(mcdc_column *c, int64_t v, mcdc_error *err);
int mcdc_col_append_double(mcdc_column *c, double v, mcdc_error *err);
/* decimal128 as two 64-bit halves of the two's complement value */
int mcdc_col_append_decimal(mcdc_column *c, uint64_t lo, int64_t hi, mcdc_error *err);
/* utf8, binary, fixed binary (n must equal the width) */
int mcdc_col_append_bytes(mcdc_column *c, const void *p, int64_t n, mcdc_error *err);

/* Appends n nulls / n copies of an integer / n copies of a text (bulk
 * forms for constant columns such as bronze's _batch_id and _snapshot, the
 * reader's _capture_instance). */
int mcdc_col_append_nulls(mcdc_column *c, int64_t n, mcdc_error *err);
int mcdc_col_fill_int(mcdc_column *c, int64_t v, int64_t n, mcdc_error *err);
int mcdc_col_fill_text(mcdc_column *c, const char *text, int64_t n, mcdc_error *err);

/* Appends src's value at row (NULL included) to dst; both columns must
 * have the same type (precision, scale and width included). */
int mcdc_col_copy_value(mcdc_column *dst, const mcdc_column *src, int64_t row, mcdc_error *err);

/* Appends src's values at rows idx[0..n) (NULLs included), in that order,
 * to dst: a gather, one type switch per call (sorts and merges move rows
 * with it). Same types as mcdc_col_copy_value. */
int mcdc_col_take(mcdc_column *dst, const mcdc_column *src, const int32_t *idx, int64_t n,
                  mcdc_error *err);

/* Appends, for i in [0, n), the value at row rows[i] of column
 * src[which[i]] to dst: a gather from many columns of one type (a sort's
 * output, its rows scattered over the batches it holds), one type switch
 * per call. */
int mcdc_col_gather(mcdc_column *dst, const mcdc_column *const *src, const int32_t *which,
                    const int32_t *rows, int64_t n, mcdc_error *err);

/* Appends src's values at rows [from, from + n) to dst: mcdc_col_take of a
 * range, as copies of whole buffers. */
int mcdc_col_take_range(mcdc_column *dst, const mcdc_column *src, int64_t from, int64_t n,
                        mcdc_error *err);

/* Re-homes b's columns under `wider`, a schema whose first fields equal b's
 * (names and types) and which has more after them; the new columns start
 * empty. Takes a reference to wider and drops b's old schema. */
int mcdc_batch_widen(mcdc_batch *b, mcdc_schema *wider, mcdc_error *err);

/* ---- reading ------------------------------------------------------------ */
/* How many of bits [0, n) are 0 (a validity bitmap's NULLs), a word at a
 * time; bits past n are not read beyond their byte. */
int64_t mcdc_bits_unset(const uint8_t *bits, int64_t n);
static inline bool mcdc_col_is_valid(const mcdc_column *c, int64_t i) {
    return c->validity == NULL || ((c->validity[i >> 3] >> (i & 7)) & 1);
}

/* ---- Arrow C Data Interface ------------------------------------------------
 * Export hands the batch to out_array (a struct array "+s" whose children
 * are the columns, on the batch's buffers without a copy) and describes it
 * in out_schema; *b is set to NULL. Both structs are released by their
 * consumers (pyarrow moves them); the last of the arrays released frees the
 * batch, its buffers going back to the schema's pool. Import copies the data of a struct array of supported
 * types into a new batch and releases nothing: the caller still owns (and
 * must release) array and schema. */
int mcdc_batch_export(mcdc_batch **b, struct ArrowArray *out_array,
                      struct ArrowSchema *out_schema, mcdc_error *err);
int mcdc_schema_export(const mcdc_schema *s, struct ArrowSchema *out, mcdc_error *err);
int mcdc_batch_import(mcdc_batch **out, const struct ArrowArray *array,
                      const struct ArrowSchema *schema, mcdc_error *err);

/* Moves src's values into dst (same type; dst's own values are dropped,
 * its field kept), leaving src empty: a column handed from one batch to
 * another without a copy. */
int mcdc_col_move(mcdc_column *dst, mcdc_column *src, mcdc_error *err);

/* A batch of `target` built from in's columns without copying them: column
 * i of the result is in's column from[i] (moved: same type, any name), or
 * all NULL when from[i] < 0 (a column the data lacks). Takes in (freed, also
 * on error); *out sealed, with in's rows. For renaming (physical to logical
 * names), projecting and reordering what a reader produced. */
int mcdc_batch_reshape(mcdc_batch **out, mcdc_batch *in, mcdc_schema *target, const int32_t *from,
                       mcdc_error *err);

/* Receives a sealed batch; ownership passes to the callee, also on error.
 * Non-zero stops the producer. */
typedef int (*mcdc_batch_fn)(void *ctx, mcdc_batch *b, mcdc_error *err);

#endif /* MCDC_BATCH_H */
