/*
 * mcdc_thrift.c - Thrift compact protocol writer and reader (formats.md B2).
 */
#include "mcdc_thrift.h"

#include <string.h>

/* ---- writer --------------------------------------------------------------- */

void mcdc_thrift_writer_init(mcdc_thrift_writer *w, mcdc_buf *out, mcdc_error *err) {
    memset(w, 0, sizeof *w);
    w->out = out;
    w->err = err;
}

static void tw_bytes(mcdc_thrift_writer *w, const void *p, size_t n) {
    if (w->rc) return;
    w->rc = mcdc_buf_append(w->out, p, n, w->err);
}

static void tw_byte(mcdc_thrift_writer *w, uint8_t b) { tw_bytes(w, &b, 1); }

static void tw_varint(mcdc_thrift_writer *w, uint64_t v) {
    uint8_t tmp[10];
    size_t n = 0;
    while (v >= 0x80) {
        tmp[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    tmp[n++] = (uint8_t)v;
    tw_bytes(w, tmp, n);
}

static uint64_t zigzag64(int64_t v) {
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static void tw_field_header(mcdc_thrift_writer *w, int16_t id, int type) {
    MCDC_ASSERT(w->depth > 0 && id > 0);
    int16_t last = w->last_id[w->depth];
    if (id > last && id - last <= 15) {
        tw_byte(w, (uint8_t)(((id - last) << 4) | type));
    } else {
        tw_byte(w, (uint8_t)type);
        tw_varint(w, zigzag64(id));
    }
    w->last_id[w->depth] = id;
}

void mcdc_thrift_struct_begin(mcdc_thrift_writer *w) {
    if (w->depth >= MCDC_THRIFT_DEPTH_MAX) {
        if (!w->rc) w->rc = mcdc_error_set(w->err, MCDC_E_LIMIT, "thrift nesting too deep");
        return;
    }
    w->depth++;
    w->last_id[w->depth] = 0;
}

void mcdc_thrift_struct_end(mcdc_thrift_writer *w) {
    tw_byte(w, MCDC_TT_STOP);
    if (w->depth > 0) w->depth--;
}

void mcdc_thrift_field_struct(mcdc_thrift_writer *w, int16_t id) {
    tw_field_header(w, id, MCDC_TT_STRUCT);
    mcdc_thrift_struct_begin(w);
}

void mcdc_thrift_field_i32(mcdc_thrift_writer *w, int16_t id, int32_t v) {
    tw_field_header(w, id, MCDC_TT_I32);
    tw_varint(w, zigzag64(v));
}

void mcdc_thrift_field_i64(mcdc_thrift_writer *w, int16_t id, int64_t v) {
    tw_field_header(w, id, MCDC_TT_I64);
    tw_varint(w, zigzag64(v));
}

void mcdc_thrift_field_i16(mcdc_thrift_writer *w, int16_t id, int16_t v) {
    tw_field_header(w, id, MCDC_TT_I16);
    tw_varint(w, zigzag64(v));
}

void mcdc_thrift_field_i8(mcdc_thrift_writer *w, int16_t id, int8_t v) {
    tw_field_header(w, id, MCDC_TT_I8);
    tw_byte(w, (uint8_t)v);
}

void mcdc_thrift_field_bool(mcdc_thrift_writer *w, int16_t id, bool v) {
    tw_field_header(w, id, v ? MCDC_TT_TRUE : MCDC_TT_FALSE);
}

void mcdc_thrift_field_binary(mcdc_thrift_writer *w, int16_t id, const void *p, size_t n) {
    tw_field_header(w, id, MCDC_TT_BINARY);
    tw_varint(w, n);
    tw_bytes(w, p, n);
}

void mcdc_thrift_field_string(mcdc_thrift_writer *w, int16_t id, const char *s) {
    mcdc_thrift_field_binary(w, id, s, strlen(s));
}

void mcdc_thrift_field_list(mcdc_thrift_writer *w, int16_t id, int elem_type, int64_t n) {
    MCDC_ASSERT(n >= 0);
    tw_field_header(w, id, MCDC_TT_LIST);
    /* Java and C++ write 1 as the bool element type (formats.md B2). */
    if (elem_type == MCDC_TT_FALSE) elem_type = MCDC_TT_TRUE;
    if (n <= 14) {
        tw_byte(w, (uint8_t)((n << 4) | elem_type));
    } else {
        tw_byte(w, (uint8_t)(0xF0 | elem_type));
        tw_varint(w, (uint64_t)n);
    }
}

void mcdc_thrift_elem_i32(mcdc_thrift_writer *w, int32_t v) { tw_varint(w, zigzag64(v)); }
void mcdc_thrift_elem_i64(mcdc_thrift_writer *w, int64_t v) { tw_varint(w, zigzag64(v)); }
void mcdc_thrift_elem_binary(mcdc_thrift_writer *w, const void *p, size_t n) {
    tw_varint(w, n);
    tw_bytes(w, p, n);
}
void mcdc_thrift_elem_bool(mcdc_thrift_writer *w, bool v) { tw_byte(w, v ? 1 : 2); }

/* ---- reader --------------------------------------------------------------- */

void mcdc_thrift_reader_init(mcdc_thrift_reader *r, const void *p, size_t n, const char *what,
                             mcdc_error *err) {
    memset(r, 0, sizeof *r);
    r->p = p;
    r->end = (const uint8_t *)p + n;
    r->err = err;
    r->what = what ? what : "thrift input";
}

static void tr_fail_at(mcdc_thrift_reader *r, const char *why) {
    if (r->rc) return;
    r->rc = mcdc_error_set(r->err, MCDC_E_CORRUPT,
                           "%s: corrupt Thrift metadata (%s, %td bytes before its end); the "
                           "file is damaged or not Parquet",
                           r->what, why, r->end - r->p);
    r->p = r->end;
}

void mcdc_thrift_fail(mcdc_thrift_reader *r, const char *why) { tr_fail_at(r, why); }

static uint8_t tr_byte(mcdc_thrift_reader *r) {
    if (r->rc) return 0;
    if (r->p >= r->end) {
        tr_fail_at(r, "truncated");
        return 0;
    }
    return *r->p++;
}

static uint64_t tr_varint(mcdc_thrift_reader *r) {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        uint8_t b = tr_byte(r);
        if (r->rc) return 0;
        if (shift == 63 && (b & 0x7E)) {
            tr_fail_at(r, "varint overflows 64 bits");
            return 0;
        }
        v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) return v;
    }
    tr_fail_at(r, "varint too long");
    return 0;
}

static int64_t unzigzag(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

void mcdc_thrift_read_struct_begin(mcdc_thrift_reader *r) {
    if (r->rc) return;
    if (r->depth >= MCDC_THRIFT_DEPTH_MAX) {
        r->rc = mcdc_error_set(r->err, MCDC_E_LIMIT,
                               "%s: Thrift metadata nested deeper than %d levels; the file is "
                               "damaged or hostile",
                               r->what, MCDC_THRIFT_DEPTH_MAX);
        r->p = r->end;
        return;
    }
    r->depth++;
    r->last_id[r->depth] = 0;
}

void mcdc_thrift_read_struct_end(mcdc_thrift_reader *r) {
    if (r->depth > 0) r->depth--;
}

bool mcdc_thrift_read_field(mcdc_thrift_reader *r, int16_t *id, int *type) {
    uint8_t b = tr_byte(r);
    if (r->rc || b == MCDC_TT_STOP) return false;
    int t = b & 0x0F;
    int delta = b >> 4;
    int64_t fid;
    if (delta) {
        fid = r->last_id[r->depth] + delta;
    } else {
        fid = unzigzag(tr_varint(r));
    }
    if (r->rc) return false;
    if (fid < INT16_MIN || fid > INT16_MAX || t > MCDC_TT_UUID) {
        tr_fail_at(r, "bad field header");
        return false;
    }
    r->last_id[r->depth] = (int16_t)fid;
    *id = (int16_t)fid;
    *type = t;
    if (t == MCDC_TT_TRUE || t == MCDC_TT_FALSE) r->bool_pending = (t == MCDC_TT_TRUE);
    return true;
}

static bool tr_is_int(int type) {
    return type == MCDC_TT_I8 || type == MCDC_TT_I16 || type == MCDC_TT_I32 ||
           type == MCDC_TT_I64;
}

int64_t mcdc_thrift_read_elem_int(mcdc_thrift_reader *r, int elem_type) {
    if (!tr_is_int(elem_type)) {
        tr_fail_at(r, "integer expected");
        return 0;
    }
    if (elem_type == MCDC_TT_I8) return (int8_t)tr_byte(r);
    return unzigzag(tr_varint(r));
}

int32_t mcdc_thrift_read_i32(mcdc_thrift_reader *r, int type) {
    int64_t v = mcdc_thrift_read_elem_int(r, type);
    if (v < INT32_MIN || v > INT32_MAX) {
        tr_fail_at(r, "i32 out of range");
        return 0;
    }
    return (int32_t)v;
}

int64_t mcdc_thrift_read_i64(mcdc_thrift_reader *r, int type) {
    return mcdc_thrift_read_elem_int(r, type);
}

bool mcdc_thrift_read_bool(mcdc_thrift_reader *r, int type) {
    if (type != MCDC_TT_TRUE && type != MCDC_TT_FALSE) {
        tr_fail_at(r, "bool expected");
        return false;
    }
    return r->bool_pending;
}

bool mcdc_thrift_read_elem_bool(mcdc_thrift_reader *r, int elem_type) {
    if (elem_type != MCDC_TT_TRUE && elem_type != MCDC_TT_FALSE) {
        tr_fail_at(r, "bool expected");
        return false;
    }
    return tr_byte(r) == 1;
}

const uint8_t *mcdc_thrift_read_binary(mcdc_thrift_reader *r, int type, size_t *n) {
    *n = 0;
    if (type != MCDC_TT_BINARY) {
        tr_fail_at(r, "binary expected");
        return NULL;
    }
    uint64_t len = tr_varint(r);
    if (r->rc) return NULL;
    if (len > (uint64_t)(r->end - r->p)) {
        tr_fail_at(r, "string longer than the metadata");
        return NULL;
    }
    const uint8_t *p = r->p;
    r->p += len;
    *n = (size_t)len;
    return p;
}

int64_t mcdc_thrift_read_list(mcdc_thrift_reader *r, int type, int *elem_type) {
    *elem_type = 0;
    if (type != MCDC_TT_LIST && type != MCDC_TT_SET) {
        tr_fail_at(r, "list expected");
        return 0;
    }
    uint8_t h = tr_byte(r);
    uint64_t n = h >> 4;
    if (n == 15) n = tr_varint(r);
    if (r->rc) return 0;
    *elem_type = h & 0x0F;
    /* Every element takes at least one byte, except bools... which take one
     * too in lists. So the count is bounded by the bytes left. */
    if (n > (uint64_t)(r->end - r->p)) {
        tr_fail_at(r, "list longer than the metadata");
        return 0;
    }
    return (int64_t)n;
}

void mcdc_thrift_skip(mcdc_thrift_reader *r, int type) {
    if (r->rc) return;
    switch (type) {
    case MCDC_TT_TRUE:
    case MCDC_TT_FALSE:
        return; /* field bools carry no value byte */
    case MCDC_TT_I8:
        (void)tr_byte(r);
        return;
    case MCDC_TT_I16:
    case MCDC_TT_I32:
    case MCDC_TT_I64:
        (void)tr_varint(r);
        return;
    case MCDC_TT_DOUBLE:
        if (r->end - r->p < 8) {
            tr_fail_at(r, "truncated double");
            return;
        }
        r->p += 8;
        return;
    case MCDC_TT_UUID:
        if (r->end - r->p < 16) {
            tr_fail_at(r, "truncated uuid");
            return;
        }
        r->p += 16;
        return;
    case MCDC_TT_BINARY: {
        size_t n;
        (void)mcdc_thrift_read_binary(r, type, &n);
        return;
    }
    case MCDC_TT_STRUCT: {
        mcdc_thrift_read_struct_begin(r);
        int16_t id;
        int t;
        while (mcdc_thrift_read_field(r, &id, &t)) mcdc_thrift_skip(r, t);
        mcdc_thrift_read_struct_end(r);
        return;
    }
    case MCDC_TT_LIST:
    case MCDC_TT_SET: {
        int et;
        int64_t n = mcdc_thrift_read_list(r, type, &et);
        /* Nesting guard: lists recurse like structs. */
        mcdc_thrift_read_struct_begin(r);
        for (int64_t i = 0; i < n && !r->rc; i++) {
            if (et == MCDC_TT_TRUE || et == MCDC_TT_FALSE)
                (void)tr_byte(r);
            else
                mcdc_thrift_skip(r, et);
        }
        mcdc_thrift_read_struct_end(r);
        return;
    }
    case MCDC_TT_MAP: {
        uint64_t n = tr_varint(r);
        if (r->rc || n == 0) return;
        uint8_t kv = tr_byte(r);
        if (n > (uint64_t)(r->end - r->p)) {
            tr_fail_at(r, "map longer than the metadata");
            return;
        }
        int kt = kv >> 4, vt = kv & 0x0F;
        mcdc_thrift_read_struct_begin(r);
        for (uint64_t i = 0; i < n && !r->rc; i++) {
            if (kt == MCDC_TT_TRUE || kt == MCDC_TT_FALSE) (void)tr_byte(r);
            else mcdc_thrift_skip(r, kt);
            if (vt == MCDC_TT_TRUE || vt == MCDC_TT_FALSE) (void)tr_byte(r);
            else mcdc_thrift_skip(r, vt);
        }
        mcdc_thrift_read_struct_end(r);
        return;
    }
    default:
        tr_fail_at(r, "unknown type");
        return;
    }
}
