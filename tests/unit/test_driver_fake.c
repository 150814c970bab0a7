/* test_driver_fake.c - the scripted connection of test_driver_fake.h. */
#include "test_driver_fake.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_test.h"

typedef struct reply {
    char *match;
    char *cols;
    char *rows;
    int code, server_number;
    char *text;
    int drop_after; /* -1 = no drop */
    bool used;
} reply;

struct fake_db {
    reply r[256];
    int n;
    mcdc_buf log;
    int execs;
    char *tmp;
};

fake_db *fake_new(void) {
    fake_db *f = mcdc_calloc(1, sizeof *f);
    return f;
}

void fake_free(fake_db *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++) {
        mcdc_free(f->r[i].match);
        mcdc_free(f->r[i].cols);
        mcdc_free(f->r[i].rows);
        mcdc_free(f->r[i].text);
    }
    mcdc_buf_free(&f->log);
    mcdc_free(f->tmp);
    mcdc_free(f);
}

static reply *add(fake_db *f, const char *match) {
    if (f->n >= 256) abort();
    reply *r = &f->r[f->n++];
    memset(r, 0, sizeof *r);
    r->match = match ? mcdc_strdup(match) : NULL;
    r->drop_after = -1;
    return r;
}

void fake_reply(fake_db *f, const char *match, const char *cols, const char *rows) {
    reply *r = add(f, match);
    r->cols = mcdc_strdup(cols);
    r->rows = mcdc_strdup(rows ? rows : "");
}

void fake_error(fake_db *f, const char *match, int code, int server_number, const char *text) {
    reply *r = add(f, match);
    r->code = code;
    r->server_number = server_number;
    r->text = mcdc_strdup(text);
}

void fake_drop_after(fake_db *f, const char *match, const char *cols, const char *rows,
                     int rows_before) {
    fake_reply(f, match, cols, rows);
    f->r[f->n - 1].drop_after = rows_before;
}

const char *fake_log(const fake_db *f) { return f->log.data ? (const char *)f->log.data : ""; }
int fake_exec_count(const fake_db *f) { return f->execs; }
int fake_unused_replies(const fake_db *f) {
    int n = 0;
    for (int i = 0; i < f->n; i++) n += !f->r[i].used;
    return n;
}
void fake_clear_log(fake_db *f) {
    mcdc_buf_reset(&f->log);
    f->execs = 0;
}

const char *fake_sql(fake_db *f, int i) {
    const char *s = fake_log(f);
    for (int k = 0; k < i && s; k++) {
        s = strstr(s, "\n;;\n");
        if (s) s += 4;
    }
    if (!s || !*s) return NULL;
    const char *e = strstr(s, "\n;;\n");
    mcdc_free(f->tmp);
    f->tmp = mcdc_strndup(s, e ? (size_t)(e - s) : strlen(s));
    return f->tmp;
}

/* ---- connection and result ---- */
typedef struct {
    fake_db *db;
    bool dead;
} fconn;

typedef struct {
    fconn *conn;
    mcdc_schema *schema;
    char **cells; /* nrows * ncols, NULL = SQL NULL */
    int nrows, ncols, next;
    int drop_after;
} fresult;

static mcdc_type_id parse_type(const char *t, int32_t *p, int32_t *s) {
    *p = *s = 0;
    if (!strcmp(t, "utf8")) return MCDC_TYPE_UTF8;
    if (!strcmp(t, "i16")) return MCDC_TYPE_INT16;
    if (!strcmp(t, "i32")) return MCDC_TYPE_INT32;
    if (!strcmp(t, "i64")) return MCDC_TYPE_INT64;
    if (!strcmp(t, "bool")) return MCDC_TYPE_BOOL;
    if (!strcmp(t, "f64")) return MCDC_TYPE_DOUBLE;
    if (!strcmp(t, "ts")) return MCDC_TYPE_TIMESTAMP_NTZ;
    if (!strcmp(t, "date")) return MCDC_TYPE_DATE32;
    if (!strcmp(t, "bin")) return MCDC_TYPE_BINARY;
    if (sscanf(t, "dec(%d,%d)", p, s) == 2) return MCDC_TYPE_DECIMAL;
    abort();
}

static const mcdc_schema *f_schema(void *impl) { return ((fresult *)impl)->schema; }

static int put_cell(mcdc_column *c, const char *v, mcdc_error *err) {
    if (v == NULL) return mcdc_col_append_null(c, err);
    int64_t i;
    switch (c->field->type) {
    case MCDC_TYPE_UTF8: return mcdc_col_append_bytes(c, v, (int64_t)strlen(v), err);
    case MCDC_TYPE_BINARY: {
        uint8_t b[256];
        size_t n = 0;
        for (const char *q = v + 2; q[0] && q[1] && n < sizeof b; q += 2) {
            unsigned x;
            sscanf(q, "%2x", &x);
            b[n++] = (uint8_t)x;
        }
        return mcdc_col_append_bytes(c, b, (int64_t)n, err);
    }
    case MCDC_TYPE_BOOL: return mcdc_col_append_bool(c, v[0] == '1', err);
    case MCDC_TYPE_DOUBLE:
    case MCDC_TYPE_FLOAT: return mcdc_col_append_double(c, strtod(v, NULL), err);
    case MCDC_TYPE_TIMESTAMP_NTZ:
    case MCDC_TYPE_TIMESTAMP_UTC:
        if (mcdc_parse_ts_us(v, strlen(v), &i, err) != MCDC_OK) return err->code;
        return mcdc_col_append_int(c, i, err);
    case MCDC_TYPE_DATE32:
        if (mcdc_parse_ts_us(v, strlen(v), &i, err) != MCDC_OK) return err->code;
        return mcdc_col_append_int(c, i / 86400000000LL, err);
    case MCDC_TYPE_DECIMAL: {
        /* "123.45" scaled to the column's scale */
        bool neg = v[0] == '-';
        const char *q = neg ? v + 1 : v;
        int64_t m = 0;
        int frac = -1;
        for (; *q; q++) {
            if (*q == '.') {
                frac = 0;
                continue;
            }
            m = m * 10 + (*q - '0');
            if (frac >= 0) frac++;
        }
        if (frac < 0) frac = 0;
        for (; frac < c->field->scale; frac++) m *= 10;
        if (neg) m = -m;
        return mcdc_col_append_decimal(c, (uint64_t)m, m < 0 ? -1 : 0, err);
    }
    default:
        if (mcdc_parse_i64(v, &i) != MCDC_OK)
            return mcdc_error_set(err, MCDC_E_SCHEMA, "fake: '%s' is not an integer", v);
        return mcdc_col_append_int(c, i, err);
    }
}

static int f_fetch(void *impl, mcdc_batch *into, int32_t first, int64_t rows_max,
                   int64_t bytes_max, int64_t *out_rows, mcdc_error *err) {
    (void)bytes_max;
    fresult *r = impl;
    *out_rows = 0;
    int64_t n = 0;
    while (n < rows_max && r->next < r->nrows) {
        if (r->drop_after >= 0 && r->next >= r->drop_after) {
            r->conn->dead = true;
            return mcdc_error_set(err, MCDC_E_TRANSIENT,
                                  "reading a row: FreeTDS error 20004 talking to fake: Read "
                                  "from the server failed");
        }
        for (int c = 0; c < r->ncols; c++) {
            int rc = put_cell(&into->columns[first + c], r->cells[r->next * r->ncols + c], err);
            if (rc != MCDC_OK) return rc;
        }
        r->next++;
        n++;
    }
    *out_rows = n;
    return MCDC_OK;
}

static void f_result_free(void *impl) {
    fresult *r = impl;
    for (int i = 0; i < r->nrows * r->ncols; i++) mcdc_free(r->cells[i]);
    mcdc_free(r->cells);
    mcdc_schema_unref(r->schema);
    mcdc_free(r);
}

static const mcdc_result_ops F_RESULT_OPS = {f_schema, f_fetch, f_result_free};

static int f_exec(void *impl, const char *sql, const mcdc_result_ops **out_ops, void **out,
                  mcdc_error *err) {
    fconn *c = impl;
    fake_db *f = c->db;
    if (c->dead) return mcdc_error_set(err, MCDC_E_TRANSIENT, "fake: connection is dead");
    mcdc_buf_append_str(&f->log, sql, NULL);
    mcdc_buf_append_str(&f->log, "\n;;\n", NULL);
    mcdc_buf_cstr(&f->log, NULL);
    f->execs++;
    reply *r = NULL;
    for (int i = 0; i < f->n; i++)
        if (!f->r[i].used && (f->r[i].match == NULL || strstr(sql, f->r[i].match))) {
            r = &f->r[i];
            break;
        }
    if (r == NULL) {
        fprintf(stderr, "  fake: no reply for: %s\n", sql);
        return mcdc_error_set(err, MCDC_E_SERVER, "fake: no reply scripted");
    }
    r->used = true;
    if (r->code) {
        mcdc_error_set(err, r->code, "fake: SQL Server error %d: %s", r->server_number, r->text);
        if (err) err->server_number = r->server_number;
        if (r->code == MCDC_E_TRANSIENT) c->dead = true;
        return r->code;
    }
    fresult *res = mcdc_calloc(1, sizeof *res);
    res->conn = c;
    res->drop_after = r->drop_after;
    /* columns */
    int ncols = 0;
    char spec[1024];
    snprintf(spec, sizeof spec, "%s", r->cols);
    char *names[64], *types[64];
    /* split at commas outside parentheses */
    char *tok = spec;
    int depth = 0;
    for (char *q2 = spec;; q2++) {
        if (*q2 == '(') depth++;
        if (*q2 == ')') depth--;
        if ((*q2 == ',' && depth == 0) || *q2 == 0) {
            bool end = *q2 == 0;
            *q2 = 0;
            if (*tok) {
                char *colon = strrchr(tok, ':');
                if (colon == NULL || ncols >= 64) abort();
                *colon = 0;
                names[ncols] = tok;
                types[ncols] = colon + 1;
                ncols++;
            }
            if (end) break;
            tok = q2 + 1;
        }
    }
    mcdc_schema_create(&res->schema, ncols, NULL);
    for (int i = 0; i < ncols; i++) {
        int32_t p, s;
        mcdc_type_id t = parse_type(types[i], &p, &s);
        mcdc_schema_set(res->schema, i, names[i], t, p, s, 0, true, NULL);
    }
    res->ncols = ncols;
    /* rows */
    const char *q = r->rows;
    int cap = 16;
    res->cells = mcdc_calloc((size_t)cap * (size_t)(ncols ? ncols : 1), sizeof(char *));
    while (*q) {
        const char *eol = strchr(q, '\n');
        size_t len = eol ? (size_t)(eol - q) : strlen(q);
        if (res->nrows == cap) {
            cap *= 2;
            res->cells = mcdc_realloc(res->cells, (size_t)cap * (size_t)ncols * sizeof(char *));
        }
        const char *cell = q;
        for (int col = 0; col < ncols; col++) {
            const char *bar = memchr(cell, '|', len - (size_t)(cell - q));
            size_t cl = bar ? (size_t)(bar - cell) : len - (size_t)(cell - q);
            char *v = (cl == 2 && cell[0] == '\\' && cell[1] == 'N') ? NULL
                                                                    : mcdc_strndup(cell, cl);
            res->cells[res->nrows * ncols + col] = v;
            cell = bar ? bar + 1 : cell + cl;
        }
        res->nrows++;
        q = eol ? eol + 1 : q + len;
    }
    *out_ops = &F_RESULT_OPS;
    *out = res;
    return MCDC_OK;
}

static int f_spid(void *impl) {
    (void)impl;
    return 55;
}
static bool f_dead(void *impl) { return ((fconn *)impl)->dead; }
static void f_close(void *impl) { mcdc_free(impl); }
static const mcdc_conn_ops F_CONN_OPS = {f_exec, f_spid, f_dead, f_close};

mcdc_conn *fake_connect(fake_db *f) {
    fconn *c = mcdc_calloc(1, sizeof *c);
    c->db = f;
    mcdc_conn *conn = NULL;
    mcdc_conn_wrap(&conn, &F_CONN_OPS, c, NULL);
    return conn;
}
