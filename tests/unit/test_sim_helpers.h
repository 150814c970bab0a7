/* test_sim_helpers.h - a collecting sink and helpers for the simulator's
 * engine tests (in-process, no TDS). */
#ifndef TEST_SIM_HELPERS_H
#define TEST_SIM_HELPERS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_test.h"
#include "sim_engine.h"

#define COLL_ROWS 256
#define COLL_CELL 1024

typedef struct coll {
    int nsets;
    int ncols;
    char colnames[1024];
    sim_column cols[64];
    char colname_buf[64][128];
    int nrows;              /* rows of the last result set */
    char rows[COLL_ROWS][COLL_CELL];
    int err_number;         /* first error */
    char err_text[512];
    int nerrors;
    int info_number;
    int ndone;
    long long last_count;
    char db[128];
    int tran_events[8];
    int ntran;
    int return_status;
    int nretvals;           /* RETURNVALUEs: "ordinal|name|value" */
    char retvals[8][128];
} coll;

static inline int coll_columns(void *ctx, const sim_column *cols, int n) {
    coll *c = ctx;
    c->nsets++;
    c->ncols = n;
    c->nrows = 0;
    c->colnames[0] = 0;
    for (int k = 0; k < n; k++) {
        size_t l = strlen(c->colnames);
        snprintf(c->colnames + l, sizeof c->colnames - l, "%s%s", k ? "|" : "", cols[k].name);
        if (k < 64) {
            c->cols[k] = cols[k];
            snprintf(c->colname_buf[k], sizeof c->colname_buf[k], "%s", cols[k].name);
            c->cols[k].name = c->colname_buf[k];
        }
    }
    return 0;
}

static inline int coll_row(void *ctx, const sim_value *v, int n) {
    coll *c = ctx;
    if (c->nrows >= COLL_ROWS) { c->nrows++; return 0; }
    char *o = c->rows[c->nrows++];
    size_t l = 0;
    o[0] = 0;
    for (int k = 0; k < n && l < COLL_CELL - 64; k++) {
        if (k) o[l++] = '|';
        switch (v[k].kind) {
        case SIM_V_NULL: l += (size_t)snprintf(o + l, COLL_CELL - l, "NULL"); break;
        case SIM_V_INT: l += (size_t)snprintf(o + l, COLL_CELL - l, "%lld", (long long)v[k].i); break;
        case SIM_V_REAL: l += (size_t)snprintf(o + l, COLL_CELL - l, "%g", v[k].f); break;
        case SIM_V_TEXT: l += (size_t)snprintf(o + l, COLL_CELL - l, "%.*s", (int)(v[k].n > 900 ? 900 : v[k].n), (const char *)v[k].p); break;
        case SIM_V_BLOB:
            l += (size_t)snprintf(o + l, COLL_CELL - l, "0x");
            for (size_t b = 0; b < v[k].n && l < COLL_CELL - 4; b++) l += (size_t)snprintf(o + l, COLL_CELL - l, "%02X", v[k].p[b]);
            break;
        }
        o[l] = 0;
    }
    return 0;
}

static inline int coll_done(void *ctx, int64_t rows, bool has, bool in_proc, bool error) {
    coll *c = ctx;
    (void)has; (void)in_proc; (void)error;
    c->ndone++;
    c->last_count = rows;
    return 0;
}

static inline int coll_msg(void *ctx, bool is_error, int number, int state, int cls, const char *text, const char *proc, int line) {
    coll *c = ctx;
    (void)state; (void)cls; (void)proc; (void)line;
    if (is_error) {
        if (!c->nerrors) { c->err_number = number; snprintf(c->err_text, sizeof c->err_text, "%s", text); }
        c->nerrors++;
    } else c->info_number = number;
    return 0;
}

static inline int coll_db(void *ctx, const char *n, const char *o) {
    (void)o;
    snprintf(((coll *)ctx)->db, 128, "%s", n);
    return 0;
}

static inline int coll_tran(void *ctx, int type, uint64_t d) {
    coll *c = ctx;
    (void)d;
    if (c->ntran < 8) c->tran_events[c->ntran++] = type;
    return 0;
}

static inline int coll_status(void *ctx, int32_t st) { ((coll *)ctx)->return_status = st; return 0; }

static inline int coll_retval(void *ctx, int ordinal, const char *name, const sim_type *t, const sim_value *v) {
    coll *c = ctx;
    (void)t;
    if (c->nretvals >= 8) return 0;
    char *o = c->retvals[c->nretvals++];
    switch (v->kind) {
    case SIM_V_NULL: snprintf(o, 128, "%d|%s|NULL", ordinal, name); break;
    case SIM_V_INT: snprintf(o, 128, "%d|%s|%lld", ordinal, name, (long long)v->i); break;
    case SIM_V_REAL: snprintf(o, 128, "%d|%s|%g", ordinal, name, v->f); break;
    default: snprintf(o, 128, "%d|%s|%.*s", ordinal, name, (int)(v->n > 90 ? 90 : v->n), (const char *)v->p); break;
    }
    return 0;
}

/* Runs sql; the collector is reset first. */
static inline coll *run(sim_session *s, coll *c, const char *sql) {
    memset(c, 0, sizeof *c);
    sim_sink k = {c, coll_columns, coll_row, coll_done, coll_msg, coll_db, coll_tran, coll_status, coll_retval, NULL, NULL};
    sim_exec_batch(s, sql, strlen(sql), &k);
    if (c->nerrors && getenv("SIM_TEST_VERBOSE")) fprintf(stderr, "  [sql error %d: %s] in: %.200s\n", c->err_number, c->err_text, sql);
    return c;
}

/* The single value of a one-row one-column result. */
static inline const char *scalar(sim_session *s, coll *c, const char *sql) {
    run(s, c, sql);
    return c->nrows == 1 ? c->rows[0] : "(no single row)";
}

static inline void test_tmpdir(char *buf, size_t cap) {
    snprintf(buf, cap, "/tmp/simtest-XXXXXX");
    if (!mkdtemp(buf)) buf[0] = 0;
}

static inline void test_rmdir(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
}

static inline sim_server *test_server(const char *dir, int poll_ms) {
    sim_config cfg = {dir, "Sa_Passw0rd", "UTC", 16, poll_ms, 0, 500};
    sim_server *srv = NULL;
    mcdc_error err = MCDC_ERROR_INIT;
    if (sim_server_open(&srv, &cfg, &err) != MCDC_OK) fprintf(stderr, "sim_server_open: %s\n", err.message);
    return srv;
}

static inline sim_session *test_login(sim_server *srv, const char *user, const char *pw, const char *db) {
    sim_session *s = NULL;
    mcdc_error err = MCDC_ERROR_INIT;
    if (sim_login(srv, &s, user, pw, db, "test", &err) != MCDC_OK) fprintf(stderr, "sim_login: %s\n", err.message);
    return s;
}

#endif
