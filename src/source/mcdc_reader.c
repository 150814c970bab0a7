/* mcdc_reader.c - one change-table range into batches, with the retention
 * guard, permission diagnosis, retries that resume, and range metrics. */
#include "mcdc_reader.h"

#include <stdio.h>
#include <string.h>

#include "mcdc_ewkb.h"
#include "mcdc_options.h" /* mcdc_validate_capture_instance */

/* Fixed leading columns of the output schema. */
enum { COL_CI = 0, COL_START_LSN, COL_SEQVAL, COL_OPERATION };

int mcdc_connect_connstr(void *ctx, mcdc_conn **out, mcdc_error *err) {
    const mcdc_connstr_connector *k = ctx;
    return mcdc_conn_open(out, k->connstr, &k->options, err);
}

/* The reader's and bronze's own columns (bronze's are lake's, which the
 * reader cannot see: mcdc_bronze_schema adds them). */
static const char *const RESERVED[] = {"_capture_instance", "_start_lsn", "_seqval",
                                       "_operation",        "_command_id", "_commit_ts",
                                       "_batch_id",         "_snapshot",   "_chunk"};

bool mcdc_is_reserved_column(const char *name) {
    for (size_t i = 0; i < sizeof RESERVED / sizeof RESERVED[0]; i++)
        if (mcdc_str_ieq(name, RESERVED[i])) return true;
    return false;
}

int mcdc_check_reserved_columns(const mcdc_schema *s, int32_t first, mcdc_error *err) {
    MCDC_ASSERT(first >= 0 && first <= s->n_fields);
    for (int32_t i = first; i < s->n_fields; i++)
        if (mcdc_is_reserved_column(s->fields[i].name))
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "the capture instance captures a column named '%s', which "
                                  "mssql-cdc reserves for its own columns: leave it out of "
                                  "@captured_column_list, or pass the option columns without it",
                                  s->fields[i].name);
    return MCDC_OK;
}

int mcdc_reader_output_schema(mcdc_schema **out, const mcdc_schema *captured,
                              bool include_command_id, mcdc_error *err) {
    if (captured) {
        int rc = mcdc_check_reserved_columns(captured, 0, err);
        if (rc != MCDC_OK) return rc;
    }
    int32_t meta = include_command_id ? 6 : 5;
    int32_t n = meta + (captured ? captured->n_fields : 0);
    if (n > MCDC_COLUMNS_MAX)
        return mcdc_error_set(err, MCDC_E_LIMIT, "%d columns exceed the limit of %d", n,
                              MCDC_COLUMNS_MAX);
    mcdc_schema *s = NULL;
    int rc = mcdc_schema_create(&s, n, err);
    if (rc != MCDC_OK) return rc;
    int32_t i = 0;
    rc = mcdc_schema_set(s, i++, "_capture_instance", MCDC_TYPE_UTF8, 0, 0, 0, false, err);
    if (rc == MCDC_OK)
        rc = mcdc_schema_set(s, i++, "_start_lsn", MCDC_TYPE_UTF8, 0, 0, 0, false, err);
    if (rc == MCDC_OK) rc = mcdc_schema_set(s, i++, "_seqval", MCDC_TYPE_UTF8, 0, 0, 0, true, err);
    if (rc == MCDC_OK)
        rc = mcdc_schema_set(s, i++, "_operation", MCDC_TYPE_INT32, 0, 0, 0, false, err);
    if (rc == MCDC_OK && include_command_id)
        rc = mcdc_schema_set(s, i++, "_command_id", MCDC_TYPE_INT32, 0, 0, 0, true, err);
    if (rc == MCDC_OK)
        rc = mcdc_schema_set(s, i++, "_commit_ts", MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0, true, err);
    for (int32_t k = 0; captured && k < captured->n_fields && rc == MCDC_OK; k++) {
        const mcdc_field *f = &captured->fields[k];
        rc = mcdc_schema_set(s, i++, f->name, f->type, f->precision, f->scale, f->byte_width,
                             true, err);
    }
    if (rc != MCDC_OK) {
        mcdc_schema_unref(s);
        return rc;
    }
    *out = s;
    return MCDC_OK;
}

/* The column_ids of ci's source table that are computed (sys.columns), or
 * *ids NULL when none. */
static int computed_ids(int **ids, int *n_ids, mcdc_cdc_client *c, const char *ci,
                        mcdc_error *err) {
    *ids = NULL;
    *n_ids = 0;
    mcdc_capture_instance *v = NULL;
    int n = 0;
    int rc = mcdc_cdc_capture_instances(&v, &n, c, NULL, NULL, err);
    const mcdc_capture_instance *mine = NULL;
    for (int i = 0; rc == MCDC_OK && i < n && !mine; i++)
        if (mcdc_str_ieq(v[i].name, ci)) mine = &v[i];
    mcdc_table_column *t = NULL;
    int nt = 0;
    if (rc == MCDC_OK && mine)
        rc = mcdc_cdc_table_columns(&t, &nt, c, mine->source_schema, mine->source_table, err);
    for (int i = 0; rc == MCDC_OK && i < nt; i++) {
        if (!t[i].computed) continue;
        int *grown = mcdc_realloc(*ids, (size_t)(*n_ids + 1) * sizeof **ids);
        if (grown == NULL) {
            rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
            break;
        }
        *ids = grown;
        (*ids)[(*n_ids)++] = t[i].column_id;
    }
    mcdc_table_columns_free(t, nt);
    mcdc_capture_instances_free(v, n);
    return rc;
}

int mcdc_reader_infer_columns(mcdc_schema **out, uint8_t **reads, char **unreadable,
                              char **computed, bool keep_computed, mcdc_cdc_client *c,
                              const char *ci, mcdc_error *err) {
    *out = NULL;
    if (reads) *reads = NULL;
    *unreadable = NULL;
    if (computed) *computed = NULL;
    mcdc_captured_column *cols = NULL;
    int n = 0;
    int rc = mcdc_cdc_captured_columns(&cols, &n, c, ci, err);
    if (rc == MCDC_E_NOTFOUND)
        mcdc_error_wrap(err,
                        "capture instance '%s' not found: check captureInstance (EXEC "
                        "sys.sp_cdc_help_change_data_capture lists the instances)",
                        ci);
    if (rc != MCDC_OK) return rc;
    if (n == 0) {
        mcdc_captured_columns_free(cols, n);
        return mcdc_error_set(err, MCDC_E_NOTFOUND,
                              "capture instance '%s' has no captured columns: check the name "
                              "(sys.sp_cdc_help_change_data_capture lists them)",
                              ci);
    }
    mcdc_type_id *types = mcdc_calloc((size_t)n, sizeof *types);
    int32_t *prec = mcdc_calloc((size_t)n, sizeof *prec), *scale = mcdc_calloc((size_t)n, sizeof *scale);
    mcdc_buf skipped = {0}, comp = {0};
    int readable = 0;
    if (types == NULL || prec == NULL || scale == NULL)
        rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    /* Computed columns: CDC stores NULL for them in every change row. */
    int *cids = NULL, n_cids = 0;
    if (rc == MCDC_OK) rc = computed_ids(&cids, &n_cids, c, ci, err);
    for (int i = 0; i < n && rc == MCDC_OK; i++) {
        bool is_computed = false;
        for (int k = 0; k < n_cids; k++) is_computed |= cids[k] == cols[i].column_id;
        if (is_computed) {
            rc = mcdc_buf_printf(&comp, err, "%s%s", comp.len ? ", " : "", cols[i].name);
            if (!keep_computed) continue; /* types[i] stays 0: left out */
        }
        if (rc) break;
        mcdc_error why = MCDC_ERROR_INIT;
        int m = mcdc_cdc_map_type(&types[i], &prec[i], &scale[i], &cols[i], &why);
        if (m == MCDC_OK) readable++;
        else if (m == MCDC_E_UNSUPPORTED) {
            types[i] = 0; /* left out */
            rc = mcdc_buf_printf(&skipped, err, "%s%s (%s)", skipped.len ? ", " : "",
                                 cols[i].name, cols[i].data_type);
        } else if (err) {
            *err = why;
            rc = m;
        } else {
            rc = m;
        }
    }
    mcdc_schema *s = NULL;
    uint8_t *how = NULL; /* the reads, when one is not a plain value */
    if (rc == MCDC_OK) rc = mcdc_schema_create(&s, readable, err);
    for (int i = 0, k = 0; i < n && rc == MCDC_OK; i++) {
        if (types[i] == 0) continue;
        const mcdc_sql_type *st = mcdc_sql_type_named(cols[i].data_type);
        if (reads && st && st->read != MCDC_READ_VALUE && how == NULL &&
            (how = mcdc_calloc((size_t)readable, 1)) == NULL)
            rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        if (how && st) how[k] = st->read;
        if (rc == MCDC_OK)
            rc = mcdc_schema_set(s, k++, cols[i].name, types[i], prec[i], scale[i], 0, true, err);
    }
    if (rc == MCDC_OK && skipped.len) {
        rc = mcdc_buf_cstr(&skipped, err);
        if (rc == MCDC_OK) {
            *unreadable = (char *)skipped.data;
            skipped.data = NULL;
        }
    }
    if (rc == MCDC_OK && comp.len && computed && (rc = mcdc_buf_cstr(&comp, err)) == MCDC_OK) {
        *computed = (char *)comp.data;
        comp.data = NULL;
    }
    mcdc_buf_free(&comp);
    mcdc_free(cids);
    mcdc_buf_free(&skipped);
    mcdc_free(types);
    mcdc_free(prec);
    mcdc_free(scale);
    mcdc_captured_columns_free(cols, n);
    if (rc != MCDC_OK) {
        mcdc_schema_unref(s);
        mcdc_free(how);
        return rc;
    }
    *out = s;
    if (reads) *reads = how;
    return MCDC_OK;
}

int mcdc_reader_finish_reads(mcdc_batch *b, int32_t first, const uint8_t *reads, int32_t n,
                             mcdc_error *err) {
    MCDC_ASSERT(first >= 0 && first + n <= b->schema->n_fields);
    for (int32_t i = 0; reads && i < n; i++) {
        if (reads[i] != MCDC_READ_SPATIAL) continue;
        int rc = mcdc_ewkb_column(&b->columns[first + i], err);
        if (rc != MCDC_OK) return rc;
    }
    return MCDC_OK;
}

/* ---- planning ------------------------------------------------------------------------ */
static int push_range(mcdc_lsn_range **v, int *n, int *cap, const mcdc_lsn *from,
                      const mcdc_lsn *to, int64_t rows, mcdc_error *err) {
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 8;
        mcdc_lsn_range *nv = mcdc_realloc(*v, sizeof *nv * (size_t)nc);
        if (nv == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory planning");
        *v = nv;
        *cap = nc;
    }
    (*v)[*n] = (mcdc_lsn_range){*from, *to, rows, false, 0};
    (*n)++;
    return MCDC_OK;
}

int mcdc_reader_plan_ranges(mcdc_lsn_range **out, int *n_out, const mcdc_split_point *tiles,
                            int n_tiles, const mcdc_lsn *from, const mcdc_lsn *to,
                            int64_t min_rows, mcdc_error *err) {
    *out = NULL;
    *n_out = 0;
    if (mcdc_lsn_cmp(to, from) < 0) return MCDC_OK; /* nothing to read */
    mcdc_lsn_range *v = NULL;
    int n = 0, cap = 0, rc = MCDC_OK;
    mcdc_lsn start = *from;
    int64_t acc = 0;
    for (int i = 0; i < n_tiles && rc == MCDC_OK; i++) {
        MCDC_ASSERT(i == 0 || mcdc_lsn_cmp(&tiles[i].bound, &tiles[i - 1].bound) > 0);
        acc += tiles[i].rows;
        /* Close a range here only if rows follow it inside [from, to]. */
        if (acc >= min_rows && i < n_tiles - 1 && mcdc_lsn_cmp(&tiles[i].bound, to) < 0 &&
            mcdc_lsn_cmp(&tiles[i].bound, &start) >= 0) {
            rc = push_range(&v, &n, &cap, &start, &tiles[i].bound, acc, err);
            start = tiles[i].next_start;
            acc = 0;
        }
    }
    if (rc == MCDC_OK) {
        if (n > 0 && acc < min_rows) {
            v[n - 1].to = *to; /* a short tail joins the previous range */
            v[n - 1].rows_estimate += acc;
        } else if (mcdc_lsn_cmp(to, &start) >= 0) {
            rc = push_range(&v, &n, &cap, &start, to, acc, err);
        } else if (n > 0) {
            v[n - 1].to = *to;
        }
    }
    if (rc != MCDC_OK) {
        mcdc_free(v);
        return rc;
    }
    if (n > 0) v[n - 1].last = true;
    *out = v;
    *n_out = n;
    return MCDC_OK;
}

/* ---- one attempt ------------------------------------------------------------------ */
typedef struct attempt {
    const mcdc_reader_options *opt;
    const mcdc_schema *captured; /* columns to read */
    const uint8_t *reads;        /* how each is selected (NULL: as they are) */
    mcdc_schema *out_schema;
    mcdc_lsn from, to;
    bool last;
    mcdc_batch_fn sink;
    void *sink_ctx;
    /* resume state across attempts */
    bool have_key;
    mcdc_row_key key;
    mcdc_reader_metrics *m;
    bool wait_before_known;
    int64_t wait_before;
} attempt;

int mcdc_reader_fill_capture_instance(mcdc_batch *b, const char *ci, int64_t rows,
                                      mcdc_error *err) {
    return mcdc_col_fill_text(&b->columns[COL_CI], ci, rows, err);
}

int mcdc_reader_fill_snapshot_stamp(mcdc_batch *b, int32_t first_captured, const char *lsn_text,
                                    bool has_ts, int64_t commit_us, int64_t rows,
                                    mcdc_error *err) {
    MCDC_ASSERT(first_captured == 5 || first_captured == 6);
    MCDC_ASSERT(first_captured <= b->schema->n_fields && strlen(lsn_text) == MCDC_LSN_TEXT_LEN);
    int rc = MCDC_OK;
    for (int32_t i = COL_START_LSN; rc == MCDC_OK && i < first_captured; i++) {
        mcdc_column *c = &b->columns[i];
        const char *name = c->field->name;
        if (i == COL_START_LSN) {
            MCDC_ASSERT(strcmp(name, "_start_lsn") == 0);
            rc = mcdc_col_fill_text(c, lsn_text, rows, err);
        } else if (i == COL_OPERATION) {
            MCDC_ASSERT(strcmp(name, "_operation") == 0);
            rc = mcdc_col_fill_int(c, 0, rows, err);
        } else if (i == first_captured - 1 && has_ts) {
            MCDC_ASSERT(strcmp(name, "_commit_ts") == 0);
            rc = mcdc_col_fill_int(c, commit_us, rows, err);
        } else { /* _seqval, _command_id, an unknown _commit_ts */
            MCDC_ASSERT(strcmp(name, "_seqval") == 0 || strcmp(name, "_command_id") == 0 ||
                        strcmp(name, "_commit_ts") == 0);
            rc = mcdc_col_append_nulls(c, rows, err);
        }
    }
    return rc;
}

static bool utf8_cell_lsn(const mcdc_column *c, int64_t row, mcdc_lsn *out) {
    if (!mcdc_col_is_valid(c, row)) return false;
    return mcdc_lsn_parse(out, (const char *)c->data + c->offsets[row],
                          (size_t)(c->offsets[row + 1] - c->offsets[row]), NULL) == MCDC_OK;
}

static int32_t i32_cell(const mcdc_column *c, int64_t row) {
    int32_t v;
    memcpy(&v, c->values + row * 4, 4);
    return v;
}

/* The ordering key of the batch's last row (the resume point). */
static int last_key(const mcdc_batch *b, bool with_command_id, mcdc_row_key *k,
                    mcdc_error *err) {
    int64_t r = b->rows - 1;
    memset(k, 0, sizeof *k);
    if (!utf8_cell_lsn(&b->columns[COL_START_LSN], r, &k->start_lsn) ||
        !utf8_cell_lsn(&b->columns[COL_SEQVAL], r, &k->seqval))
        return mcdc_error_set(err, MCDC_E_PROTOCOL,
                              "a change row without a valid __$start_lsn or __$seqval");
    k->operation = i32_cell(&b->columns[COL_OPERATION], r);
    if (with_command_id) k->command_id = i32_cell(&b->columns[COL_OPERATION + 1], r);
    return MCDC_OK;
}

int mcdc_reader_diagnose_error(mcdc_cdc_client *c, const char *ci, int rc, mcdc_error *err) {
    char table[MCDC_IDENT_BYTES_MAX + 8];
    snprintf(table, sizeof table, "%s_CT", ci);
    if (err == NULL || strstr(err->message, table) == NULL) return rc;
    if (rc == MCDC_E_TRANSIENT) return rc;
    mcdc_error saved = *err;
    mcdc_error probe = MCDC_ERROR_INIT;
    int has = -1;
    if (mcdc_cdc_has_select(&has, c, ci, &probe) == MCDC_OK && has == 0) {
        char *user = NULL;
        mcdc_cdc_user_name(&user, c, &probe);
        mcdc_error_set(err, MCDC_E_PERMISSION,
                       "no SELECT permission on the change table cdc.[%s_CT] of capture "
                       "instance '%s'; a DBA must run: GRANT SELECT ON cdc.[%s_CT] TO [%s];",
                       ci, ci, ci, user ? user : "<user>");
        err->server_number = saved.server_number;
        err->server_state = saved.server_state;
        err->server_class = saved.server_class;
        err->server_line = saved.server_line;
        mcdc_free(user);
        return MCDC_E_PERMISSION;
    }
    *err = saved;
    if (rc == MCDC_E_NOTFOUND)
        mcdc_error_wrap(err,
                        "capture instance '%s': its change table cdc.[%s_CT] is missing "
                        "(instance disabled or misspelt; sys.sp_cdc_help_change_data_capture "
                        "lists the instances)",
                        ci, ci);
    return rc;
}

static int read_rows(attempt *a, mcdc_cdc_client *c, mcdc_error *err) {
    const mcdc_reader_options *opt = a->opt;
    const char *ci = opt->capture_instance;
    mcdc_buf commit = {0}, sql = {0};
    int rc = mcdc_cdc_commit_time_sql(&commit, c, &a->from, &a->to, "m.tran_end_time",
                                      "c.__$start_lsn", err);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&commit, err);
    if (rc == MCDC_OK)
        rc = mcdc_cdc_changes_sql(&sql, ci, a->captured->fields, opt->present, a->reads,
                                  a->captured->n_fields, opt->include_command_id,
                                  (const char *)commit.data, a->have_key ? &a->key : NULL, err);
    mcdc_buf_free(&commit);
    if (rc != MCDC_OK) {
        mcdc_buf_free(&sql);
        return rc;
    }
    char f[MCDC_LSN_TEXT_LEN + 1], t[MCDC_LSN_TEXT_LEN + 1];
    mcdc_lsn_format(&a->from, f);
    mcdc_lsn_format(&a->to, t);
    const char *p[] = {f, t};
    mcdc_result *r = NULL;
    rc = mcdc_conn_exec(&r, mcdc_cdc_client_conn(c), (const char *)sql.data, p, 2, err);
    mcdc_buf_free(&sql);
    if (rc != MCDC_OK) return mcdc_reader_diagnose_error(c, ci, rc, err);
    int64_t rows_max = opt->batch_rows > 0 ? opt->batch_rows : 10000;
    for (;;) {
        mcdc_batch *b = NULL;
        rc = mcdc_batch_create(&b, a->out_schema, rows_max, err);
        if (rc != MCDC_OK) break;
        int64_t n = 0;
        rc = mcdc_result_fetch(r, b, 1, rows_max, opt->batch_bytes_max, &n, err);
        if (rc == MCDC_OK && n > 0)
            rc = mcdc_reader_finish_reads(b, b->schema->n_fields - a->captured->n_fields,
                                          a->reads, a->captured->n_fields, err);
        if (rc == MCDC_OK && n > 0) rc = mcdc_col_fill_text(&b->columns[COL_CI], ci, n, err);
        if (rc == MCDC_OK && n > 0) rc = mcdc_batch_seal(b, err);
        if (rc != MCDC_OK || n == 0) {
            mcdc_batch_free(b);
            break;
        }
        mcdc_row_key k;
        rc = last_key(b, opt->include_command_id, &k, err);
        if (rc != MCDC_OK) {
            mcdc_batch_free(b);
            break;
        }
        MCDC_ASSERT(b->rows == n);
        int64_t bytes = mcdc_batch_bytes(b);
        /* The sink owns the batch from here, whatever it returns. */
        rc = a->sink(a->sink_ctx, b, err);
        if (rc != MCDC_OK) {
            mcdc_result_free(r);
            return rc == MCDC_E_TRANSIENT ? MCDC_E_IO : rc; /* never retry a sink failure */
        }
        a->key = k;
        a->have_key = true;
        a->m->rows += n;
        a->m->bytes += bytes;
    }
    mcdc_result_free(r);
    if (rc != MCDC_OK) return mcdc_reader_diagnose_error(c, ci, rc, err);
    return MCDC_OK;
}

static int guard(attempt *a, mcdc_cdc_client *c, mcdc_error *err) {
    const char *ci = a->opt->capture_instance;
    mcdc_lsn min;
    int rc = mcdc_cdc_min_lsn(&min, c, ci, err);
    if (rc != MCDC_OK) return rc;
    a->m->min_lsn_after = min;
    if (mcdc_lsn_cmp(&a->from, &min) >= 0) return MCDC_OK;
    char f[MCDC_LSN_TEXT_LEN + 1], ml[MCDC_LSN_TEXT_LEN + 1];
    mcdc_lsn_format(&a->from, f);
    mcdc_lsn_format(&min, ml);
    if (!a->opt->fail_on_data_loss) {
        a->m->data_lost = true;
        mcdc_log(MCDC_LOG_WARN,
                 "capture instance '%s': changes from %s up to %s were purged by CDC cleanup "
                 "before they were read (failOnDataLoss=false: continuing)",
                 ci, f, ml);
        return MCDC_OK;
    }
    return mcdc_error_set(err, MCDC_E_DATALOSS,
                          "capture instance '%s': changes from %s on are no longer available: "
                          "CDC cleanup moved min_lsn to %s before they were read. Rerun the "
                          "stream with --on-data-loss resnapshot (and a --facts-table) to "
                          "re-snapshot the table into a new generation, or set "
                          "failOnDataLoss=false to skip to min_lsn and record the gap",
                          ci, f, ml);
}

static void measure_position(attempt *a, mcdc_cdc_client *c) {
    mcdc_reader_metrics *m = a->m;
    mcdc_error e = MCDC_ERROR_INIT;
    bool found = false;
    int64_t us = 0;
    /* Metrics never fail a read: each value stays unknown on error. */
    if (mcdc_cdc_max_lsn(&m->max_lsn, NULL, c, &e) != MCDC_OK) {
        mcdc_log(MCDC_LOG_DEBUG, "range metrics: %s", e.message);
        return;
    }
    m->measured_position = true;
    if (mcdc_cdc_lsn_to_time(&us, &found, c, &a->to, true, &e) == MCDC_OK && found) {
        m->to_commit_ts_us = us;
        m->to_commit_ts_known = true;
    }
    /* The watermark: the commit time of min_lsn's own mapping entry, as
     * sys.fn_cdc_map_lsn_to_time and the reference read it. A new
     * instance's min_lsn is its start LSN, which cdc.lsn_time_mapping does
     * not hold: unknown (NULL) until cleanup moves min_lsn to an entry
     * (docs/tables.md, retention metrics). */
    if (mcdc_cdc_lsn_to_time(&us, &found, c, &m->min_lsn_after, false, &e) == MCDC_OK && found) {
        m->retention_watermark_ts_us = us;
        m->retention_watermark_known = true;
    }
    if (mcdc_cdc_lsn_to_time(&us, &found, c, &m->max_lsn, true, &e) == MCDC_OK && found) {
        m->source_max_commit_ts_us = us;
        m->source_max_commit_ts_known = true;
        m->capture_lag_seconds = (double)(mcdc_now_utc_us() - us) / 1e6;
    }
}

static int run_attempt(attempt *a, mcdc_connect_fn connect, void *connect_ctx,
                       mcdc_schema **inferred, uint8_t **inferred_reads, mcdc_error *err) {
    mcdc_conn *conn = NULL;
    int rc = connect(connect_ctx, &conn, err);
    if (rc != MCDC_OK) return rc;
    mcdc_cdc_client *c = NULL;
    rc = mcdc_cdc_client_create(&c, conn, err);
    if (rc != MCDC_OK) {
        mcdc_conn_close(conn);
        return rc;
    }
    mcdc_cdc_set_clock(c, &a->opt->clock);
    if (a->captured == NULL) {
        char *unreadable = NULL;
        rc = mcdc_reader_infer_columns(inferred, inferred_reads, &unreadable, NULL, false, c,
                                       a->opt->capture_instance, err);
        if (rc == MCDC_OK && unreadable)
            rc = mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                                "capture instance %s captures %s, whose SQL Server type has no "
                                "default type: give the reader the columns to read",
                                a->opt->capture_instance, unreadable);
        mcdc_free(unreadable);
        if (rc == MCDC_OK) {
            a->captured = *inferred;
            a->reads = *inferred_reads;
            rc = mcdc_reader_output_schema(&a->out_schema, a->captured,
                                           a->opt->include_command_id, err);
        }
    }
    if (rc == MCDC_OK) {
        double rtt = 0;
        mcdc_error e = MCDC_ERROR_INIT;
        if (mcdc_cdc_ping(&rtt, c, &e) == MCDC_OK) {
            a->m->rtt_ms = rtt;
            a->m->rtt_known = true;
        } else if (e.code == MCDC_E_TRANSIENT) {
            *err = e;
            rc = e.code;
        }
    }
    if (rc == MCDC_OK) mcdc_cdc_network_wait_ms(&a->wait_before, &a->wait_before_known, c);
    if (rc == MCDC_OK) rc = read_rows(a, c, err);
    if (rc == MCDC_OK) rc = guard(a, c, err);
    if (rc == MCDC_OK) {
        int64_t after = 0;
        bool known = false;
        mcdc_cdc_network_wait_ms(&after, &known, c);
        if (known && a->wait_before_known) {
            a->m->network_wait_ms += after - a->wait_before;
            a->m->network_wait_known = true;
        }
        if (a->last) measure_position(a, c);
    }
    mcdc_cdc_client_free(c);
    mcdc_conn_close(conn);
    return rc;
}

static uint64_t jitter_next(void) {
    static _Thread_local uint64_t s;
    if (s == 0) s = (uint64_t)mcdc_monotonic_us() * 0x9E3779B97F4A7C15ull | 1;
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
}

int mcdc_reader_read_range(mcdc_reader_metrics *metrics, const mcdc_reader_options *opt,
                           mcdc_connect_fn connect, void *connect_ctx, const mcdc_lsn *from,
                           const mcdc_lsn *to, bool last, mcdc_batch_fn sink,
                           void *sink_ctx, mcdc_error *err) {
    MCDC_ASSERT(opt != NULL && connect != NULL && from != NULL && to != NULL && sink != NULL);
    mcdc_reader_metrics local;
    mcdc_reader_metrics *m = metrics ? metrics : &local;
    memset(m, 0, sizeof *m);
    m->from_lsn = *from;
    m->to_lsn = *to;
    int rc = mcdc_validate_capture_instance(opt->capture_instance, err);
    if (rc != MCDC_OK) return rc;
    if (mcdc_lsn_cmp(to, from) < 0) return MCDC_OK; /* an empty range reads nothing */
    int64_t t0 = mcdc_monotonic_us();
    attempt a;
    memset(&a, 0, sizeof a);
    a.opt = opt;
    a.captured = opt->columns;
    a.reads = opt->columns ? opt->reads : NULL;
    a.from = *from;
    a.to = *to;
    a.last = last;
    a.sink = sink;
    a.sink_ctx = sink_ctx;
    a.m = m;
    if (opt->columns) {
        rc = mcdc_reader_output_schema(&a.out_schema, opt->columns, opt->include_command_id, err);
        if (rc != MCDC_OK) return rc;
    }
    mcdc_schema *inferred = NULL;
    uint8_t *inferred_reads = NULL;
    int retries_max = opt->retries_max >= 0 ? opt->retries_max : 0;
    int64_t backoff = opt->backoff_ms_first > 0 ? opt->backoff_ms_first : 0;
    for (int attempt_no = 0;; attempt_no++) {
        m->attempts = attempt_no + 1;
        rc = run_attempt(&a, connect, connect_ctx, &inferred, &inferred_reads, err);
        if (rc != MCDC_E_TRANSIENT || attempt_no >= retries_max) break;
        int64_t wait = backoff + (backoff > 0 ? (int64_t)(jitter_next() % (uint64_t)backoff) : 0);
        mcdc_log(MCDC_LOG_WARN,
                 "reading %s: %s; retrying on a new connection in %lld ms (retry %d of %d)",
                 opt->capture_instance, err ? err->message : "transient error",
                 (long long)wait, attempt_no + 1, retries_max);
        if (wait > 0) mcdc_sleep_ms(wait);
        backoff *= 2;
    }
    if (rc == MCDC_E_TRANSIENT && err)
        mcdc_error_wrap(err, "reading %s after %d attempts", opt->capture_instance, m->attempts);
    m->seconds = (double)(mcdc_monotonic_us() - t0) / 1e6;
    mcdc_schema_unref(a.out_schema);
    mcdc_schema_unref(inferred);
    mcdc_free(inferred_reads);
    return rc;
}
