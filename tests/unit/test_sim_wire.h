/* test_sim_wire.h - runs a batch through the TDS result sink into memory:
 * the reply bytes a client would get (tests compare paths byte for byte). */
#ifndef TEST_SIM_WIRE_H
#define TEST_SIM_WIRE_H

#include "mcdc_cdc_client.h"
#include "sim_engine_int.h"
#include "tds_result.h"

/* A server on dir with the clock in zone (NULL on failure). */
static inline sim_server *wire_open(const char *dir, const char *zone) {
    sim_config cfg = {dir, "Sa_Passw0rd", zone, 16, 0, 0, 500};
    sim_server *srv = NULL;
    mcdc_error err = MCDC_ERROR_INIT;
    if (sim_server_open(&srv, &cfg, &err) != MCDC_OK) fprintf(stderr, "sim_server_open: %s\n", err.message);
    return srv;
}

/* The instance's min LSN and the max LSN as the reader writes them. */
static inline void wire_lsn_range(sim_session *s, coll *c, const char *ci, char lo[64], char hi[64]) {
    char q[256];
    snprintf(q, sizeof q, "SELECT CONVERT(varchar(22), sys.fn_cdc_get_min_lsn(N'%s'), 1)", ci);
    snprintf(lo, 64, "%.63s", scalar(s, c, q));
    snprintf(hi, 64, "%.63s", scalar(s, c, "SELECT CONVERT(varchar(22), sys.fn_cdc_get_max_lsn(), 1)"));
}

static int wire_write(void *ctx, const uint8_t *p, size_t n) {
    return mcdc_buf_append((mcdc_buf *)ctx, p, n, NULL) == MCDC_OK ? 0 : 1;
}

/* The reply to sql (TDS 7.4 client: NBCROW allowed) into out (reset). */
static inline void wire_run(sim_session *s, const char *sql, mcdc_buf *out) {
    mcdc_buf_reset(out);
    out->limit = 1u << 30;
    sim_tds_out o;
    sim_tds_result r;
    sim_sink k;
    if (sim_tds_out_init(&o, wire_write, out, NULL) != MCDC_OK) return;
    sim_tds_result_init(&r, &o, NULL);
    r.nbcrow = true;
    sim_tds_result_sink(&r, &k);
    sim_tds_result_begin(&r, false, true);
    sim_exec_batch(s, sql, strlen(sql), &k);
    sim_tds_result_end_batch(&r);
    sim_tds_result_free(&r);
    sim_tds_out_free(&o);
}

/* The same reply from the store, from SQLite's fast path and from the
 * general path; returns how many of the three agree with the store's
 * (3 = all) and counts the store's use in *stored. */
static inline int wire_compare3(sim_server *srv, sim_session *s, const char *sql, int64_t *stored, mcdc_buf *w) {
    mcdc_buf a = {0}, b = {0}, c = {0};
    int64_t q0 = srv->store_queries;
    wire_run(s, sql, &a);
    *stored = srv->store_queries - q0;
    sim_server_set_change_cache_mb(srv, 0);
    wire_run(s, sql, &b);
    srv->fast_off = true;
    wire_run(s, sql, &c);
    srv->fast_off = false;
    sim_server_set_change_cache_mb(srv, SIM_CHANGE_CACHE_MB_DEFAULT);
    int same = 1 + (a.len == b.len && memcmp(a.data, b.data, a.len) == 0) + (a.len == c.len && memcmp(a.data, c.data, a.len) == 0);
    if (same != 3) {
        fprintf(stderr, "  wire differs (%zu / %zu / %zu bytes) for: %.300s\n", a.len, b.len, c.len, sql);
        for (size_t k = 0; k < a.len && k < c.len; k++)
            if (a.data[k] != c.data[k]) { fprintf(stderr, "  first difference at byte %zu\n", k); break; }
    }
    if (w) {
        mcdc_buf_reset(w);
        mcdc_buf_append(w, a.data, a.len, NULL);
    }
    mcdc_buf_free(&a);
    mcdc_buf_free(&b);
    mcdc_buf_free(&c);
    return same;
}

/* The reader's SQL with the two range parameters written as literals. */
static inline void reader_sql(mcdc_buf *out, const mcdc_field *f, const bool *present, int n, bool cmd, const mcdc_clock *clk,
                       const char *lo, const char *hi, const mcdc_row_key *after) {
    mcdc_buf ct = {0}, q = {0};
    mcdc_clock_sql_utc(&ct, clk, "m.tran_end_time", false, 0, NULL);
    mcdc_buf_cstr(&ct, NULL);
    mcdc_cdc_changes_sql(&q, "dbo_all", f, present, NULL, n, cmd, (const char *)ct.data, after, NULL);
    mcdc_buf_cstr(&q, NULL);
    out->len = 0;
    int arg = 0;
    for (const char *p = (const char *)q.data; *p; p++) {
        if (*p == '?') mcdc_buf_printf(out, NULL, "'%s'", arg++ ? hi : lo);
        else mcdc_buf_append_byte(out, (uint8_t)*p, NULL);
    }
    mcdc_buf_cstr(out, NULL);
    mcdc_buf_free(&ct);
    mcdc_buf_free(&q);
}

#endif
