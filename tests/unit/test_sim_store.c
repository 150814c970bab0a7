/* test_sim_store.c - the change store stays coherent with every writer of
 * a change table: sim.bulk_load fills it, capture appends, a sysadmin's
 * DELETE, retention cleanup, disable/enable and a restart; past its memory
 * limit SQLite answers; two sessions read it at once. Every answer is
 * compared byte for byte with SQLite's fast path and the general path. */
#include "test_sim_helpers.h"
#include "test_sim_wire.h"

#include <pthread.h>

typedef struct store_fx {
    char dir[64];
    sim_server *srv;
    sim_session *s;
    coll *c;
    mcdc_field f[4];
    bool present[4];
    mcdc_buf q;
} store_fx;

static void fx_open(store_fx *x, const char *db) {
    x->srv = wire_open(x->dir, "UTC");
    CHECK(x->srv != NULL);
    x->s = x->srv ? test_login(x->srv, "sa", "Sa_Passw0rd", db) : NULL;
}

static void fx_close(store_fx *x) {
    sim_session_close(x->s);
    sim_server_close(x->srv);
    x->s = NULL;
    x->srv = NULL;
}

/* The reader's query over the whole timeline: 3 paths agree, the store
 * served it (when stored_expected). Returns the row count. */
static int fx_read(store_fx *x, bool stored_expected) {
    char lo[64], hi[64];
    wire_lsn_range(x->s, x->c, "dbo_all", lo, hi);
    mcdc_clock utc = {MCDC_CLOCK_UTC, "", 0};
    reader_sql(&x->q, x->f, x->present, 4, true, &utc, lo, hi, NULL);
    int64_t stored = 0;
    CHECK_EQ_INT(wire_compare3(x->srv, x->s, (const char *)x->q.data, &stored, NULL), 3);
    CHECK_EQ_INT((int)stored, stored_expected ? 1 : 0);
    run(x->s, x->c, (const char *)x->q.data);
    return x->c->nrows;
}

static int ct_count(store_fx *x) { return atoi(scalar(x->s, x->c, "SELECT COUNT(*) FROM cdc.dbo_all_CT")); }

/* A check hook that stops the reply after `left` rows (as a row fault or an
 * ATTENTION does through the TDS layer's hook). */
typedef struct stop_after {
    int left, rows_checked;
} stop_after;

static int stop_check(void *ctx, sim_tds_result *r, int what) {
    (void)r;
    stop_after *a = ctx;
    if (what != 0) return 0;
    a->rows_checked++;
    return a->left-- <= 0;
}

typedef struct reader_arg {
    sim_server *srv;
    const char *sql;
    size_t first_len;
    int bad;
} reader_arg;

static void *reader_thread(void *p) {
    reader_arg *a = p;
    sim_session *s = test_login(a->srv, "sa", "Sa_Passw0rd", "lab");
    mcdc_buf w = {0};
    for (int k = 0; k < 5 && s; k++) {
        wire_run(s, a->sql, &w);
        if (w.len < a->first_len) a->bad++; /* capture only adds rows meanwhile */
    }
    mcdc_buf_free(&w);
    sim_session_close(s);
    return NULL;
}

TEST(sim_store_coherent_with_every_writer) {
    store_fx *x = calloc(1, sizeof *x);
    x->c = calloc(1, sizeof *x->c);
    test_tmpdir(x->dir, sizeof x->dir);
    fx_open(x, NULL);
    run(x->s, x->c, "CREATE DATABASE lab; USE lab;"
                    " CREATE TABLE dbo.[all] (id int NOT NULL PRIMARY KEY, v nvarchar(30) NULL, d decimal(10,2) NULL,"
                    " t datetime2(3) NULL);"
                    " EXEC sys.sp_cdc_enable_db;"
                    " EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'all', @role_name = NULL");
    CHECK_EQ_INT(x->c->nerrors, 0);
    static const char *NAMES[] = {"id", "v", "d", "t"};
    for (int k = 0; k < 4; k++) {
        x->f[k].name = (char *)NAMES[k];
        x->f[k].type = MCDC_TYPE_UTF8;
        x->f[k].nullable = true;
        x->present[k] = true;
    }
    /* bulk load: the store holds the rows before any read */
    CHECK_EQ_INT((int)sim_stores_bytes(x->srv->stores), 0);
    run(x->s, x->c, "EXEC sim.bulk_load @capture_instance = N'dbo_all', @transactions = 40, @rows_per_tx = 5, @seed = 3");
    CHECK_EQ_INT(x->c->nerrors, 0);
    CHECK(sim_stores_bytes(x->srv->stores) > 0);
    CHECK_EQ_INT(fx_read(x, true), 200);
    /* capture appends: caught up by the next read */
    run(x->s, x->c, "INSERT INTO dbo.[all] VALUES (100000, N'Zoë', 1.25, '2024-01-01 10:00:00.123');"
                    " UPDATE dbo.[all] SET v = N'東京' WHERE id = 100000; EXEC sim.run_capture");
    CHECK_EQ_INT(x->c->nerrors, 0);
    CHECK_EQ_INT(fx_read(x, true), 203);
    /* a second bulk load after existing rows joins the store */
    run(x->s, x->c, "EXEC sim.bulk_load @capture_instance = N'dbo_all', @transactions = 10, @rows_per_tx = 3, @seed = 4");
    CHECK_EQ_INT(fx_read(x, true), 233);
    /* any other write on the change table (T-SQL DML on cdc tables is not
     * supported by the simulator; written here on the writer connection as
     * the engine would): the store is dropped and rebuilt */
    sim_db *d = sim_find_db(x->srv, "lab");
    CHECK(d != NULL);
    if (!d) return;
    pthread_mutex_lock(&x->srv->mu);
    CHECK_EQ_INT(sqlite3_exec(d->w, "DELETE FROM \"cdc.dbo_all_CT\" WHERE \"__$operation\" = 1", NULL, NULL, NULL), SQLITE_OK);
    pthread_mutex_unlock(&x->srv->mu);
    int left = ct_count(x);
    CHECK(left < 233);
    CHECK_EQ_INT(fx_read(x, true), left);
    /* while such a write's transaction is open SQLite answers */
    pthread_mutex_lock(&x->srv->mu);
    sqlite3_exec(d->w, "BEGIN; DELETE FROM \"cdc.dbo_all_CT\" WHERE \"__$operation\" = 2", NULL, NULL, NULL);
    pthread_mutex_unlock(&x->srv->mu);
    CHECK_EQ_INT(fx_read(x, false), left);
    pthread_mutex_lock(&x->srv->mu);
    sqlite3_exec(d->w, "ROLLBACK", NULL, NULL, NULL);
    pthread_mutex_unlock(&x->srv->mu);
    CHECK_EQ_INT(fx_read(x, true), left);
    mcdc_buf w = {0};
    int64_t q0;
    /* cleanup: the low water mark moves, rows below it go */
    char cl[600];
    snprintf(cl, sizeof cl, "DECLARE @lw binary(10) = (SELECT MIN(__$start_lsn) FROM cdc.dbo_all_CT WHERE id > 20);"
                            " EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_all', @low_water_mark = @lw, @threshold = 5000");
    run(x->s, x->c, cl);
    CHECK_EQ_INT(x->c->nerrors, 0);
    left = ct_count(x);
    CHECK_EQ_INT(fx_read(x, true), left);
    /* past the memory limit SQLite answers (the same bytes) */
    sim_server_set_change_cache_mb(x->srv, 1);
    sim_store_invalidate(x->srv->stores, "lab", "dbo_all");
    q0 = x->srv->store_queries;
    mcdc_buf g = {0};
    wire_run(x->s, (const char *)x->q.data, &w);
    CHECK_EQ_INT((int)(x->srv->store_queries - q0), 0);
    x->srv->fast_off = true;
    wire_run(x->s, (const char *)x->q.data, &g);
    x->srv->fast_off = false;
    CHECK(w.len == g.len && memcmp(w.data, g.data, w.len) == 0);
    sim_server_set_change_cache_mb(x->srv, SIM_CHANGE_CACHE_MB_DEFAULT);
    sim_store_invalidate(x->srv->stores, "lab", "dbo_all");
    CHECK_EQ_INT(fx_read(x, true), left);
    /* two sessions read while capture appends */
    pthread_t th[2];
    reader_arg ra[2];
    wire_run(x->s, (const char *)x->q.data, &w);
    for (int k = 0; k < 2; k++) {
        ra[k] = (reader_arg){x->srv, (const char *)x->q.data, w.len, 0};
        pthread_create(&th[k], NULL, reader_thread, &ra[k]);
    }
    for (int k = 0; k < 5; k++) {
        char ins2[200];
        snprintf(ins2, sizeof ins2, "INSERT INTO dbo.[all] (id, v) VALUES (%d, N'p'); EXEC sim.run_capture", 200000 + k);
        run(x->s, x->c, ins2);
    }
    for (int k = 0; k < 2; k++) {
        pthread_join(th[k], NULL);
        CHECK_EQ_INT(ra[k].bad, 0);
    }
    left = ct_count(x);
    CHECK_EQ_INT(fx_read(x, true), left);
    /* the TDS layer's per-row check (faults, ATTENTION) stops a store read */
    {
        mcdc_buf out = {0};
        sim_tds_out o;
        sim_tds_result r;
        sim_sink k;
        stop_after sa = {5, 0};
        int64_t s0 = x->srv->store_queries;
        CHECK_EQ_INT(sim_tds_out_init(&o, wire_write, &out, NULL), MCDC_OK);
        sim_tds_result_init(&r, &o, NULL);
        r.check = stop_check;
        r.check_ctx = &sa;
        sim_tds_result_sink(&r, &k);
        sim_tds_result_begin(&r, false, true);
        CHECK_EQ_INT(sim_exec_batch(x->s, (const char *)x->q.data, strlen((const char *)x->q.data), &k), SIM_EXEC_ABORTED);
        CHECK_EQ_INT((int)(x->srv->store_queries - s0), 1);
        CHECK_EQ_INT(sa.rows_checked, 6); /* 5 rows sent, the 6th stopped */
        CHECK(r.stopped);
        CHECK_EQ_INT((int)r.rows_total, 5);
        sim_tds_result_free(&r);
        sim_tds_out_free(&o);
        mcdc_buf_free(&out);
        CHECK_EQ_INT(fx_read(x, true), left); /* the session goes on */
    }
    /* a restart: rebuilt from SQLite on the first read */
    fx_close(x);
    fx_open(x, "lab");
    CHECK_EQ_INT((int)sim_stores_bytes(x->srv->stores), 0);
    CHECK_EQ_INT(fx_read(x, true), left);
    CHECK(sim_stores_bytes(x->srv->stores) > 0);
    /* disable and enable again: the old rows are gone */
    run(x->s, x->c, "EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N'all', @capture_instance = N'dbo_all';"
                    " EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'all', @role_name = NULL;"
                    " EXEC sim.run_capture");
    CHECK_EQ_INT(x->c->nerrors, 0);
    run(x->s, x->c, "EXEC sim.bulk_load @capture_instance = N'dbo_all', @transactions = 3, @rows_per_tx = 2, @seed = 5");
    CHECK_EQ_INT(fx_read(x, true), 6);
    mcdc_buf_free(&w);
    mcdc_buf_free(&g);
    mcdc_buf_free(&x->q);
    fx_close(x);
    test_rmdir(x->dir);
    free(x->c);
    free(x);
}

/* More than 64 columns: the NULL bits take the general way. */
TEST(sim_store_wide_rows_match_both_paths) {
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    test_tmpdir(dir, sizeof dir);
    sim_server *srv = wire_open(dir, "UTC");
    CHECK(srv != NULL);
    if (!srv) return;
    sim_session *s = test_login(srv, "sa", "Sa_Passw0rd", NULL);
    enum { NW = 70 };
    mcdc_buf q = {0};
    mcdc_buf_append_str(&q, "CREATE DATABASE wide; USE wide; CREATE TABLE dbo.[all] (id int NOT NULL PRIMARY KEY", NULL);
    for (int k = 1; k < NW; k++) mcdc_buf_printf(&q, NULL, ", c%d %s NULL", k, k % 3 ? "int" : "nvarchar(10)");
    mcdc_buf_append_str(&q, "); EXEC sys.sp_cdc_enable_db;"
                            " EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'all', @role_name = NULL;"
                            " INSERT INTO dbo.[all] (id, c1, c3, c65, c69) VALUES (1, 10, N'x', 65, 69);"
                            " INSERT INTO dbo.[all] (id, c2) VALUES (2, 2); UPDATE dbo.[all] SET c68 = 7 WHERE id = 1;"
                            " EXEC sim.run_capture", NULL);
    mcdc_buf_cstr(&q, NULL);
    run(s, c, (const char *)q.data);
    CHECK_EQ_INT(c->nerrors, 0);
    mcdc_field f[NW];
    bool present[NW];
    char names[NW][8];
    memset(f, 0, sizeof f);
    for (int k = 0; k < NW; k++) {
        snprintf(names[k], sizeof names[k], k ? "c%d" : "id", k);
        f[k].name = names[k];
        f[k].type = MCDC_TYPE_UTF8;
        f[k].nullable = true;
        present[k] = k != 66;
    }
    char lo[64], hi[64];
    wire_lsn_range(s, c, "dbo_all", lo, hi);
    mcdc_clock utc = {MCDC_CLOCK_UTC, "", 0};
    reader_sql(&q, f, present, NW, true, &utc, lo, hi, NULL);
    int64_t stored = 0;
    CHECK_EQ_INT(wire_compare3(srv, s, (const char *)q.data, &stored, NULL), 3);
    CHECK_EQ_INT((int)stored, 1);
    run(s, c, (const char *)q.data);
    CHECK_EQ_INT(c->nrows, 4);
    mcdc_buf_free(&q);
    sim_session_close(s);
    sim_server_close(srv);
    test_rmdir(dir);
    free(c);
}
