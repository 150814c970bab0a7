/*
 * mcdc_parquet_meta.c - decoding FileMetaData and PageHeader (formats.md B3).
 * Unknown fields are skipped; sizes and counts are validated against the
 * bytes present, so a lying footer fails cleanly.
 */
#include "mcdc_parquet_int.h"
#include "mcdc_thrift.h"

int32_t mcdc_pq_decimal_bytes(int32_t precision) {
    static const int8_t bytes_for[39] = {1, 1, 1, 2, 2, 3, 3, 4, 4, 4, 5, 5, 6, 6, 6, 7,
                                         7, 8, 8, 9, 9, 9, 10, 10, 11, 11, 12, 12, 12, 13,
                                         13, 14, 14, 15, 15, 16, 16, 16, 16};
    MCDC_ASSERT(precision >= 1 && precision <= 38);
    return bytes_for[precision];
}

typedef mcdc_thrift_reader tr;

static void read_time_unit(tr *r, int32_t *unit) {
    int16_t id;
    int t;
    mcdc_thrift_read_struct_begin(r);
    while (mcdc_thrift_read_field(r, &id, &t)) {
        if (t == MCDC_TT_STRUCT && id >= 1 && id <= 3) *unit = id;
        mcdc_thrift_skip(r, t);
    }
    mcdc_thrift_read_struct_end(r);
}

static void read_logical(tr *r, pq_schema_elem *e) {
    int16_t id;
    int t;
    mcdc_thrift_read_struct_begin(r);
    while (mcdc_thrift_read_field(r, &id, &t)) {
        if (t != MCDC_TT_STRUCT) {
            mcdc_thrift_skip(r, t);
            continue;
        }
        e->logical = id;
        int16_t id2;
        int t2;
        mcdc_thrift_read_struct_begin(r);
        while (mcdc_thrift_read_field(r, &id2, &t2)) {
            if (id == PQ_LT_DECIMAL && id2 == 1) e->lt_scale = mcdc_thrift_read_i32(r, t2);
            else if (id == PQ_LT_DECIMAL && id2 == 2) e->lt_precision = mcdc_thrift_read_i32(r, t2);
            else if ((id == PQ_LT_TIMESTAMP || id == PQ_LT_TIME) && id2 == 1)
                e->lt_utc = mcdc_thrift_read_bool(r, t2);
            else if ((id == PQ_LT_TIMESTAMP || id == PQ_LT_TIME) && id2 == 2 &&
                     t2 == MCDC_TT_STRUCT)
                read_time_unit(r, &e->lt_unit);
            else if (id == PQ_LT_INTEGER && id2 == 1) e->lt_bits = (int32_t)mcdc_thrift_read_i64(r, t2);
            else if (id == PQ_LT_INTEGER && id2 == 2) e->lt_signed = mcdc_thrift_read_bool(r, t2);
            else mcdc_thrift_skip(r, t2);
        }
        mcdc_thrift_read_struct_end(r);
    }
    mcdc_thrift_read_struct_end(r);
}

static void read_schema_elem(tr *r, pq_schema_elem *e, int *rc, mcdc_error *err) {
    int16_t id;
    int t;
    e->type = -1;
    e->repetition = -1;
    e->converted = -1;
    mcdc_thrift_read_struct_begin(r);
    while (mcdc_thrift_read_field(r, &id, &t)) {
        switch (id) {
        case 1: e->type = mcdc_thrift_read_i32(r, t); break;
        case 2: e->type_length = mcdc_thrift_read_i32(r, t); break;
        case 3: e->repetition = mcdc_thrift_read_i32(r, t); break;
        case 4: {
            size_t n;
            const uint8_t *p = mcdc_thrift_read_binary(r, t, &n);
            if (p && e->name == NULL) {
                e->name = mcdc_strndup((const char *)p, n);
                if (e->name == NULL && !*rc)
                    *rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory reading the schema");
            }
            break;
        }
        case 5: e->num_children = mcdc_thrift_read_i32(r, t); break;
        case 6: e->converted = mcdc_thrift_read_i32(r, t); break;
        case 7: e->scale = mcdc_thrift_read_i32(r, t); break;
        case 8: e->precision = mcdc_thrift_read_i32(r, t); break;
        case 10:
            if (t == MCDC_TT_STRUCT) read_logical(r, e);
            else mcdc_thrift_skip(r, t);
            break;
        default: mcdc_thrift_skip(r, t);
        }
    }
    mcdc_thrift_read_struct_end(r);
}

static void read_stats(tr *r, pq_stats *s) {
    int16_t id;
    int t;
    const uint8_t *lmin = NULL, *lmax = NULL;
    size_t lmin_n = 0, lmax_n = 0;
    mcdc_thrift_read_struct_begin(r);
    while (mcdc_thrift_read_field(r, &id, &t)) {
        switch (id) {
        case 1: lmax = mcdc_thrift_read_binary(r, t, &lmax_n); break;
        case 2: lmin = mcdc_thrift_read_binary(r, t, &lmin_n); break;
        case 3:
            s->null_count = mcdc_thrift_read_i64(r, t);
            s->has_null_count = true;
            break;
        case 5: s->max = mcdc_thrift_read_binary(r, t, &s->max_len); break;
        case 6: s->min = mcdc_thrift_read_binary(r, t, &s->min_len); break;
        default: mcdc_thrift_skip(r, t);
        }
    }
    mcdc_thrift_read_struct_end(r);
    if (s->min == NULL && s->max == NULL && lmin && lmax) {
        s->min = lmin;
        s->min_len = lmin_n;
        s->max = lmax;
        s->max_len = lmax_n;
        s->legacy = true;
    }
}

static void read_col_meta(tr *r, pq_chunk_meta *c) {
    int16_t id;
    int t;
    mcdc_thrift_read_struct_begin(r);
    while (mcdc_thrift_read_field(r, &id, &t)) {
        switch (id) {
        case 1: c->type = mcdc_thrift_read_i32(r, t); break;
        case 2: {
            int et;
            int64_t n = mcdc_thrift_read_list(r, t, &et);
            for (int64_t i = 0; i < n && !r->rc; i++) {
                int64_t e = mcdc_thrift_read_elem_int(r, et);
                if (e >= 0 && e < 32) c->encodings |= 1u << e;
            }
            break;
        }
        case 4: c->codec = mcdc_thrift_read_i32(r, t); break;
        case 5: c->num_values = mcdc_thrift_read_i64(r, t); break;
        case 6: c->total_uncompressed = mcdc_thrift_read_i64(r, t); break;
        case 7: c->total_compressed = mcdc_thrift_read_i64(r, t); break;
        case 9: c->data_page_offset = mcdc_thrift_read_i64(r, t); break;
        case 11: c->dict_page_offset = mcdc_thrift_read_i64(r, t); break;
        case 12:
            if (t == MCDC_TT_STRUCT) read_stats(r, &c->stats);
            else mcdc_thrift_skip(r, t);
            break;
        default: mcdc_thrift_skip(r, t);
        }
    }
    mcdc_thrift_read_struct_end(r);
}

static void read_col_chunk(tr *r, pq_chunk_meta *c, bool *has_meta) {
    int16_t id;
    int t;
    mcdc_thrift_read_struct_begin(r);
    while (mcdc_thrift_read_field(r, &id, &t)) {
        if (id == 3 && t == MCDC_TT_STRUCT) {
            read_col_meta(r, c);
            *has_meta = true;
        } else {
            mcdc_thrift_skip(r, t);
        }
    }
    mcdc_thrift_read_struct_end(r);
}

static void read_row_group(tr *r, pq_row_group *g, int *rc, mcdc_error *err) {
    int16_t id;
    int t;
    mcdc_thrift_read_struct_begin(r);
    while (mcdc_thrift_read_field(r, &id, &t)) {
        if (id == 1 && g->columns == NULL && !*rc) {
            int et;
            int64_t n = mcdc_thrift_read_list(r, t, &et);
            if (r->rc) break;
            if (et != MCDC_TT_STRUCT && n > 0) {
                mcdc_thrift_fail(r, "row group columns are not structs");
                break;
            }
            g->columns = mcdc_calloc((size_t)(n ? n : 1), sizeof *g->columns);
            if (g->columns == NULL) {
                *rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory reading row groups");
                break;
            }
            g->n_columns = (int32_t)n;
            for (int64_t i = 0; i < n && !r->rc; i++) {
                bool has_meta = false;
                read_col_chunk(r, &g->columns[i], &has_meta);
                if (!has_meta && !r->rc)
                    mcdc_thrift_fail(r, "column chunk without metadata (encrypted or external "
                                        "columns are not supported)");
            }
        } else if (id == 3) {
            g->num_rows = mcdc_thrift_read_i64(r, t);
        } else {
            mcdc_thrift_skip(r, t);
        }
    }
    mcdc_thrift_read_struct_end(r);
}

void mcdc_pq_meta_free(pq_file_meta *m) {
    if (m == NULL) return;
    for (int32_t i = 0; i < m->n_schema; i++) mcdc_free(m->schema[i].name);
    mcdc_free(m->schema);
    for (int32_t i = 0; i < m->n_row_groups; i++) mcdc_free(m->row_groups[i].columns);
    mcdc_free(m->row_groups);
    mcdc_free(m->created_by);
    memset(m, 0, sizeof *m);
}

int mcdc_pq_meta_decode(pq_file_meta *m, const uint8_t *p, size_t n, const char *what,
                        mcdc_error *err) {
    memset(m, 0, sizeof *m);
    tr r;
    mcdc_thrift_reader_init(&r, p, n, what, err);
    int rc = MCDC_OK;
    int16_t id;
    int t;
    bool have_schema = false, have_rgs = false;
    mcdc_thrift_read_struct_begin(&r);
    while (!rc && mcdc_thrift_read_field(&r, &id, &t)) {
        if (id == 1) {
            m->version = mcdc_thrift_read_i32(&r, t);
        } else if (id == 2 && !have_schema) {
            int et;
            int64_t cnt = mcdc_thrift_read_list(&r, t, &et);
            if (r.rc) break;
            if (et != MCDC_TT_STRUCT || cnt == 0) {
                mcdc_thrift_fail(&r, "bad schema list");
                break;
            }
            if (cnt > MCDC_COLUMNS_MAX * 4) {
                rc = mcdc_error_set(err, MCDC_E_LIMIT,
                                    "%s: schema has %lld elements, more than the %d we accept",
                                    what, (long long)cnt, MCDC_COLUMNS_MAX * 4);
                break;
            }
            m->schema = mcdc_calloc((size_t)cnt, sizeof *m->schema);
            if (m->schema == NULL) {
                rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory reading the schema");
                break;
            }
            m->n_schema = (int32_t)cnt;
            for (int64_t i = 0; i < cnt && !r.rc && !rc; i++)
                read_schema_elem(&r, &m->schema[i], &rc, err);
            have_schema = true;
        } else if (id == 3) {
            m->num_rows = mcdc_thrift_read_i64(&r, t);
        } else if (id == 4 && !have_rgs) {
            int et;
            int64_t cnt = mcdc_thrift_read_list(&r, t, &et);
            if (r.rc) break;
            if (et != MCDC_TT_STRUCT && cnt > 0) {
                mcdc_thrift_fail(&r, "bad row group list");
                break;
            }
            m->row_groups = mcdc_calloc((size_t)(cnt ? cnt : 1), sizeof *m->row_groups);
            if (m->row_groups == NULL) {
                rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory reading row groups");
                break;
            }
            m->n_row_groups = (int32_t)cnt;
            for (int64_t i = 0; i < cnt && !r.rc && !rc; i++)
                read_row_group(&r, &m->row_groups[i], &rc, err);
            have_rgs = true;
        } else if (id == 6) {
            size_t len;
            const uint8_t *s = mcdc_thrift_read_binary(&r, t, &len);
            if (s && m->created_by == NULL) {
                m->created_by = mcdc_strndup((const char *)s, len);
                if (m->created_by == NULL)
                    rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory reading the footer");
            }
        } else if (id == 7) {
            m->has_column_orders = true;
            mcdc_thrift_skip(&r, t);
        } else {
            mcdc_thrift_skip(&r, t);
        }
    }
    if (!rc && r.rc) rc = r.rc;
    if (!rc && (!have_schema || !have_rgs))
        rc = mcdc_error_set(err, MCDC_E_CORRUPT,
                            "%s: footer lacks the schema or the row groups; the file is damaged",
                            what);
    if (rc) mcdc_pq_meta_free(m);
    return rc;
}

static void read_data_page_header(tr *r, pq_page_header *h) {
    int16_t id;
    int t;
    mcdc_thrift_read_struct_begin(r);
    while (mcdc_thrift_read_field(r, &id, &t)) {
        switch (id) {
        case 1: h->num_values = mcdc_thrift_read_i32(r, t); break;
        case 2: h->encoding = mcdc_thrift_read_i32(r, t); break;
        case 3: h->def_encoding = mcdc_thrift_read_i32(r, t); break;
        case 4: h->rep_encoding = mcdc_thrift_read_i32(r, t); break;
        default: mcdc_thrift_skip(r, t);
        }
    }
    mcdc_thrift_read_struct_end(r);
}

static void read_dict_page_header(tr *r, pq_page_header *h) {
    int16_t id;
    int t;
    mcdc_thrift_read_struct_begin(r);
    while (mcdc_thrift_read_field(r, &id, &t)) {
        switch (id) {
        case 1: h->num_values = mcdc_thrift_read_i32(r, t); break;
        case 2: h->encoding = mcdc_thrift_read_i32(r, t); break;
        default: mcdc_thrift_skip(r, t);
        }
    }
    mcdc_thrift_read_struct_end(r);
}

static void read_v2_page_header(tr *r, pq_page_header *h) {
    int16_t id;
    int t;
    h->is_compressed = true;
    mcdc_thrift_read_struct_begin(r);
    while (mcdc_thrift_read_field(r, &id, &t)) {
        switch (id) {
        case 1: h->num_values = mcdc_thrift_read_i32(r, t); break;
        case 2: h->num_nulls = mcdc_thrift_read_i32(r, t); break;
        case 3: h->num_rows = mcdc_thrift_read_i32(r, t); break;
        case 4: h->encoding = mcdc_thrift_read_i32(r, t); break;
        case 5: h->def_len = mcdc_thrift_read_i32(r, t); break;
        case 6: h->rep_len = mcdc_thrift_read_i32(r, t); break;
        case 7: h->is_compressed = mcdc_thrift_read_bool(r, t); break;
        default: mcdc_thrift_skip(r, t);
        }
    }
    mcdc_thrift_read_struct_end(r);
}

int mcdc_pq_page_header_decode(pq_page_header *h, const uint8_t *p, size_t n, size_t *used,
                               const char *what, mcdc_error *err) {
    memset(h, 0, sizeof *h);
    h->type = -1;
    h->uncompressed_size = -1;
    h->compressed_size = -1;
    tr r;
    mcdc_thrift_reader_init(&r, p, n, what, err);
    int16_t id;
    int t;
    mcdc_thrift_read_struct_begin(&r);
    while (mcdc_thrift_read_field(&r, &id, &t)) {
        switch (id) {
        case 1: h->type = mcdc_thrift_read_i32(&r, t); break;
        case 2: h->uncompressed_size = mcdc_thrift_read_i32(&r, t); break;
        case 3: h->compressed_size = mcdc_thrift_read_i32(&r, t); break;
        case 5:
            if (t == MCDC_TT_STRUCT) read_data_page_header(&r, h);
            else mcdc_thrift_skip(&r, t);
            break;
        case 7:
            if (t == MCDC_TT_STRUCT) read_dict_page_header(&r, h);
            else mcdc_thrift_skip(&r, t);
            break;
        case 8:
            if (t == MCDC_TT_STRUCT) read_v2_page_header(&r, h);
            else mcdc_thrift_skip(&r, t);
            break;
        default: mcdc_thrift_skip(&r, t);
        }
    }
    if (r.rc) return r.rc;
    if (h->type < 0 || h->uncompressed_size < 0 || h->compressed_size < 0 || h->num_values < 0 ||
        h->def_len < 0 || h->rep_len < 0 || h->num_nulls < 0)
        return mcdc_error_set(err, MCDC_E_CORRUPT,
                              "%s: page header lacks its type or sizes (or has negative ones); "
                              "the file is damaged",
                              what);
    *used = mcdc_thrift_consumed(&r, p);
    return MCDC_OK;
}
