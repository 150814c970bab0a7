/*
 * mcdc_thrift.h - the Thrift compact protocol, as much as Parquet metadata
 * needs (formats.md B2): a writer appending to an mcdc_buf and a bounded,
 * non-allocating reader over a byte range.
 *
 * Both sides keep a sticky status: after the first failure every call is a
 * no-op and the status (rc) stays set, so encoders and decoders check once at
 * the end of a structure instead of after every field.
 */
#ifndef MCDC_THRIFT_H
#define MCDC_THRIFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mcdc_util.h"

/* Compact protocol field / element type codes. */
enum {
    MCDC_TT_STOP = 0,
    MCDC_TT_TRUE = 1,
    MCDC_TT_FALSE = 2,
    MCDC_TT_I8 = 3,
    MCDC_TT_I16 = 4,
    MCDC_TT_I32 = 5,
    MCDC_TT_I64 = 6,
    MCDC_TT_DOUBLE = 7,
    MCDC_TT_BINARY = 8,
    MCDC_TT_LIST = 9,
    MCDC_TT_SET = 10,
    MCDC_TT_MAP = 11,
    MCDC_TT_STRUCT = 12,
    MCDC_TT_UUID = 13
};

/* ---- writer --------------------------------------------------------------- */
typedef struct mcdc_thrift_writer {
    mcdc_buf *out;        /* borrowed */
    int rc;               /* sticky status */
    int depth;            /* struct nesting */
    int16_t last_id[MCDC_THRIFT_DEPTH_MAX + 1];
    mcdc_error *err;      /* borrowed, may be NULL */
} mcdc_thrift_writer;

void mcdc_thrift_writer_init(mcdc_thrift_writer *w, mcdc_buf *out, mcdc_error *err);
/* A top-level struct (no field header). */
void mcdc_thrift_struct_begin(mcdc_thrift_writer *w);
/* Writes the stop byte and leaves the struct. */
void mcdc_thrift_struct_end(mcdc_thrift_writer *w);
/* A struct-typed field: header, then the nested struct is open. */
void mcdc_thrift_field_struct(mcdc_thrift_writer *w, int16_t id);
void mcdc_thrift_field_i32(mcdc_thrift_writer *w, int16_t id, int32_t v);
void mcdc_thrift_field_i64(mcdc_thrift_writer *w, int16_t id, int64_t v);
void mcdc_thrift_field_i16(mcdc_thrift_writer *w, int16_t id, int16_t v);
void mcdc_thrift_field_i8(mcdc_thrift_writer *w, int16_t id, int8_t v);
void mcdc_thrift_field_bool(mcdc_thrift_writer *w, int16_t id, bool v);
void mcdc_thrift_field_binary(mcdc_thrift_writer *w, int16_t id, const void *p, size_t n);
void mcdc_thrift_field_string(mcdc_thrift_writer *w, int16_t id, const char *s);
/* A list field header; elements follow with the element writers below. */
void mcdc_thrift_field_list(mcdc_thrift_writer *w, int16_t id, int elem_type, int64_t n);
/* List elements. Struct elements use mcdc_thrift_struct_begin/_end. */
void mcdc_thrift_elem_i32(mcdc_thrift_writer *w, int32_t v);
void mcdc_thrift_elem_i64(mcdc_thrift_writer *w, int64_t v);
void mcdc_thrift_elem_binary(mcdc_thrift_writer *w, const void *p, size_t n);
void mcdc_thrift_elem_bool(mcdc_thrift_writer *w, bool v);

/* ---- reader --------------------------------------------------------------- */
typedef struct mcdc_thrift_reader {
    const uint8_t *p;     /* borrowed */
    const uint8_t *end;
    int rc;               /* sticky status (MCDC_E_CORRUPT / MCDC_E_LIMIT) */
    int depth;
    int16_t last_id[MCDC_THRIFT_DEPTH_MAX + 1];
    bool bool_pending;    /* value of the last bool field header */
    mcdc_error *err;      /* borrowed, may be NULL */
    const char *what;     /* names the input in errors ("footer of x.parquet") */
} mcdc_thrift_reader;

void mcdc_thrift_reader_init(mcdc_thrift_reader *r, const void *p, size_t n, const char *what,
                             mcdc_error *err);
void mcdc_thrift_read_struct_begin(mcdc_thrift_reader *r);
void mcdc_thrift_read_struct_end(mcdc_thrift_reader *r);
/* Next field of the open struct: true with *id and *type set, false at the stop
 * byte (or after an error). */
bool mcdc_thrift_read_field(mcdc_thrift_reader *r, int16_t *id, int *type);
/* Field values; a type mismatch with the header is a corrupt-input error. */
int32_t mcdc_thrift_read_i32(mcdc_thrift_reader *r, int type);
int64_t mcdc_thrift_read_i64(mcdc_thrift_reader *r, int type);
bool mcdc_thrift_read_bool(mcdc_thrift_reader *r, int type);
/* Borrowed pointer into the input; *n bytes. */
const uint8_t *mcdc_thrift_read_binary(mcdc_thrift_reader *r, int type, size_t *n);
/* List header: element type and count (count bounded by the bytes left). */
int64_t mcdc_thrift_read_list(mcdc_thrift_reader *r, int type, int *elem_type);
/* List elements by element type. */
int64_t mcdc_thrift_read_elem_int(mcdc_thrift_reader *r, int elem_type);
bool mcdc_thrift_read_elem_bool(mcdc_thrift_reader *r, int elem_type);
/* Skips one value of the given type (recursively, depth-bounded). */
void mcdc_thrift_skip(mcdc_thrift_reader *r, int type);
/* Marks the reader corrupt with a message (used by decoders for bad values). */
void mcdc_thrift_fail(mcdc_thrift_reader *r, const char *why);
static inline size_t mcdc_thrift_consumed(const mcdc_thrift_reader *r, const void *start) {
    return (size_t)(r->p - (const uint8_t *)start);
}

#endif /* MCDC_THRIFT_H */
