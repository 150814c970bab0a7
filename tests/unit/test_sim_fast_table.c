/* test_sim_fast_table.c - the base-table fast path (sim_fast_table.c, the
 * table store of sim_store.h) answers the snapshot reader's query (built by
 * mcdc_cdc_snapshot_sql, as the reader sends it) with the same bytes on the
 * wire as the general path: every type, NULLs, absent columns, every range
 * shape, heaps, keys that do not grow with the rowid, READ COMMITTED and
 * SNAPSHOT, writes that change the table, a bulk-loaded table; and it is
 * used when it can be. */
#include "mcdc_cdc_client.h"
#include "test_driver_fake.h"
#include "sim_engine_int.h"
#include "test_sim_helpers.h"
#include "test_sim_wire.h"

/* The reply to sql from the table store and from the general path; 1 when
 * both are the same bytes; *served: reads the store answered (0 or 1). */
static int tcompare(sim_server *srv, sim_session *s, const char *sql, int64_t *served, size_t *bytes) {
    mcdc_buf a = {0}, b = {0};
    int64_t q0 = srv->table_queries;
    wire_run(s, sql, &a);
    *served = srv->table_queries - q0;
    srv->fast_off = true;
    wire_run(s, sql, &b);
    srv->fast_off = false;
    int same = a.len == b.len && memcmp(a.data, b.data, a.len) == 0;
    if (!same) {
        fprintf(stderr, "  wire differs (%zu / %zu bytes) for: %.400s\n", a.len, b.len, sql);
        for (size_t k = 0; k < a.len && k < b.len; k++)
            if (a.data[k] != b.data[k]) { fprintf(stderr, "  first difference at byte %zu\n", k); break; }
    }
    if (bytes) *bytes = a.len;
    mcdc_buf_free(&a);
    mcdc_buf_free(&b);
    return same;
}

/* Each of q[n] gets the general path's bytes, and served from the store
 * want times (1 or 0). */
static void check_served(sim_server *srv, sim_session *s, const char *const *q, size_t n, int64_t want) {
    for (size_t k = 0; k < n; k++) {
        int64_t served = 0;
        CHECK_EQ_INT(tcompare(srv, s, q[k], &served, NULL), 1);
        CHECK_EQ_INT(served, want);
    }
}

/* The snapshot reader's SQL for table tbl with the columns names[n]
 * (present[k] false: dropped, a typed NULL), [lo, hi) of the integer key
 * (NULL: the whole table; an open lo also takes the NULL keys), built by
 * mcdc_cdc_snapshot_sql as the reader builds it: integer bounds are
 * inlined, so no parameter. stamp: the stream's constant columns in front,
 * as the reader sent them before it filled them itself (and as another
 * client may): the store serves constants of the row too. */
static void snap_sql(mcdc_buf *out, const char *tbl, const char *const *names, const bool *present, int n, const char *key,
                     bool has_lo, int64_t lo, bool has_hi, int64_t hi, bool snapshot, bool stamp) {
    mcdc_field f[32];
    const char *src[32];
    memset(f, 0, sizeof f);
    for (int k = 0; k < n && k < 32; k++) {
        f[k].name = (char *)names[k];
        f[k].type = MCDC_TYPE_INT32;
        f[k].nullable = true;
        src[k] = present[k] ? names[k] : NULL;
    }
    mcdc_key_col kc;
    memset(&kc, 0, sizeof kc);
    if (key) {
        snprintf(kc.name, sizeof kc.name, "%s", key);
        snprintf(kc.type, sizeof kc.type, "bigint");
        kc.kind = MCDC_KEY_INT;
    }
    json_t *jl = key && has_lo ? json_integer((json_int_t)lo) : NULL;
    json_t *jh = key && has_hi ? json_integer((json_int_t)hi) : NULL;
    mcdc_snapshot_query q = {.source_schema = "dbo", .source_table = tbl, .cols = f, .n_cols = n, .source_names = src,
                             .keys = key ? &kc : NULL, .n_keys = key ? 1 : 0, .lo = jl, .hi = jh,
                             .read = {snapshot, snapshot ? 0 : -1}};
    mcdc_sql_params params = {0};
    mcdc_buf_reset(out);
    CHECK_EQ_INT(mcdc_cdc_snapshot_sql(out, &params, &q, NULL), MCDC_OK);
    CHECK_EQ_INT(params.n, 0);
    if (stamp) {
        char *at = strstr((char *)out->data, "; SELECT ");
        CHECK(at != NULL && strstr(at + 1, "; SELECT ") == NULL);
        size_t head = (size_t)(at - (char *)out->data) + 9;
        mcdc_buf w = {0};
        CHECK_EQ_INT(mcdc_buf_append(&w, out->data, head, NULL), MCDC_OK);
        int rc = mcdc_buf_printf(&w, NULL,
                                 "CAST('0x0000002A000001000001' AS varchar(22)) AS [_start_lsn], "
                                 "CAST(NULL AS varchar(22)) AS [_seqval], CAST(0 AS int) AS [_operation], "
                                 "CAST(NULL AS int) AS [_command_id], %s AS [_commit_ts], %s",
                                 snapshot ? "CAST(NULL AS datetime2(6))"
                                          : "CAST('2026-01-02T03:04:05.123456' AS datetime2(6))",
                                 (char *)out->data + head);
        CHECK_EQ_INT(rc, MCDC_OK);
        mcdc_buf_reset(out);
        CHECK_EQ_INT(mcdc_buf_append(out, w.data, w.len, NULL), MCDC_OK);
        CHECK_EQ_INT(mcdc_buf_cstr(out, NULL), MCDC_OK);
        mcdc_buf_free(&w);
    }
    mcdc_sql_params_free(&params);
    json_decref(jl);
    json_decref(jh);
}

/* Rows of sql through the general path's collecting sink (no cells). */
static int nrows(sim_session *s, coll *c, const char *sql) {
    run(s, c, sql);
    CHECK_EQ_INT(c->nerrors, 0);
    return c->nrows;
}

/* A server in a temporary directory and a session of sa that ran setup. */
typedef struct tfix {
    char dir[64];
    coll *c;
    sim_server *srv;
    sim_session *s;
} tfix;

static bool tfix_open(tfix *f, const char *setup) {
    memset(f, 0, sizeof *f);
    f->c = calloc(1, sizeof *f->c);
    test_tmpdir(f->dir, sizeof f->dir);
    f->srv = wire_open(f->dir, "UTC");
    CHECK(f->srv != NULL);
    if (!f->srv) return false;
    f->s = test_login(f->srv, "sa", "Sa_Passw0rd", NULL);
    run(f->s, f->c, setup);
    CHECK_EQ_INT(f->c->nerrors, 0);
    return true;
}

static void tfix_close(tfix *f) {
    sim_session_close(f->s);
    sim_server_close(f->srv);
    test_rmdir(f->dir);
    free(f->c);
}

TEST(sim_fast_table_matches_general_path) {
    tfix f;
    if (!tfix_open(&f,
                   "CREATE DATABASE lab; USE lab;"
                   " CREATE TABLE dbo.[all] (id int NOT NULL PRIMARY KEY, b bit NULL, ti tinyint NULL, si smallint NULL,"
                   " bi bigint NULL, r real NULL, f float NULL, d decimal(38,4) NULL, m money NULL, sm smallmoney NULL,"
                   " dt date NULL, tm time(7) NULL, dtm datetime NULL, sdt smalldatetime NULL, d2 datetime2(7) NULL,"
                   " dto datetimeoffset(3) NULL, ch char(4) NULL, vc varchar(20) NULL, nc nchar(3) NULL, nv nvarchar(max) NULL,"
                   " bn binary(4) NULL, vb varbinary(8) NULL, g uniqueidentifier NULL, vm varchar(max) NULL, nn int NOT NULL);"
                   " INSERT INTO dbo.[all] VALUES (1, 1, 255, -32768, 9223372036854775807, 1.5, -2.25, 12345678901234567890.1234,"
                   " 922337203685477.5807, -214748.3648, '2024-02-29', '23:59:59.1234567', '2024-01-15 10:30:00.997',"
                   " '2024-01-15 10:30:00', '2024-07-15 10:30:00.1234567', '2024-03-01 10:00:00.123 +05:30', 'ab', 'café',"
                   " N'東京', N'naïve Ωmega 😀', 0x01020304, 0x0A0B, '6F9619FF-8B86-D011-B42D-00C04FC964FF', REPLICATE('x', 9000), 7);"
                   " INSERT INTO dbo.[all] (id, nn) VALUES (2, 8), (3, 9), (5, 10);"
                   " INSERT INTO dbo.[all] (id, vc, d, nn) VALUES (7, 'seven', -0.0001, 11), (-4, 'minus', 1, 12)"))
        return;
    coll *c = f.c;
    sim_server *srv = f.srv;
    sim_session *s = f.s;
    static const char *ALL[] = {"id", "b", "ti", "si", "bi", "r", "f", "d", "m", "sm", "dt", "tm", "dtm", "sdt", "d2",
                                "dto", "ch", "vc", "nc", "nv", "bn", "vb", "g", "vm", "nn"};
    enum { NA = 25 };
    bool present[32];
    for (int k = 0; k < 32; k++) present[k] = true;
    mcdc_buf q = {0};
    int64_t served = 0;
    size_t bytes = 0;
    /* -4 was inserted after 7: the key does not grow with the rowid, and
     * the primary key's index orders a ranged read by it: SQLite answers
     * those (still the same bytes); the whole table is the store's */
    snap_sql(&q, "all", ALL, present, NA, NULL, false, 0, false, 0, false, false);
    CHECK_EQ_INT(tcompare(srv, s, (const char *)q.data, &served, &bytes), 1);
    CHECK_EQ_INT(served, 1);
    CHECK(bytes > 9000);
    CHECK_EQ_INT(nrows(s, c, (const char *)q.data), 6);
    snap_sql(&q, "all", ALL, present, NA, "id", true, 2, true, 6, false, true);
    CHECK_EQ_INT(tcompare(srv, s, (const char *)q.data, &served, NULL), 1);
    CHECK_EQ_INT(served, 0);
    run(s, c, "DELETE FROM dbo.[all] WHERE id = -4");
    /* every range shape the reader sends, with and without command id,
     * with absent columns, under SNAPSHOT too */
    for (int k = 3; k < NA; k += 4) present[k] = false;
    struct { bool lo; int64_t l; bool hi; int64_t h; int rows; } R[] = {
        {false, 0, false, 0, 5}, {true, 2, true, 6, 3}, {false, 0, true, 3, 2},
        {true, 5, false, 0, 2}, {true, 100, true, 200, 0}, {true, -100, true, 2, 1},
        {true, 3, true, 4, 1}};
    run(s, c, "ALTER DATABASE lab SET ALLOW_SNAPSHOT_ISOLATION ON");
    for (size_t r = 0; r < sizeof R / sizeof R[0]; r++)
        for (int iso = 0; iso < 2; iso++) {
            snap_sql(&q, "all", ALL, present, NA, "id", R[r].lo, R[r].l, R[r].hi, R[r].h, iso == 1, iso == 0);
            CHECK_EQ_INT(tcompare(srv, s, (const char *)q.data, &served, NULL), 1);
            CHECK_EQ_INT(served, 1);
            CHECK_EQ_INT(nrows(s, c, (const char *)q.data), R[r].rows);
        }
    /* a write drops the store; the next read rebuilds it with the change */
    run(s, c, "UPDATE dbo.[all] SET vc = 'changed', nv = NULL WHERE id = 1; INSERT INTO dbo.[all] (id, nn) VALUES (9, 1)");
    snap_sql(&q, "all", ALL, present, NA, NULL, false, 0, false, 0, false, false);
    CHECK_EQ_INT(tcompare(srv, s, (const char *)q.data, &served, NULL), 1);
    CHECK_EQ_INT(served, 1);
    run(s, c, (const char *)q.data);
    CHECK_EQ_INT(c->nrows, 6);
    CHECK(strstr(c->rows[0], "|changed|") != NULL);
    /* other shapes: a plain column list, a column named as the key, a
     * constant NULL, an expression (general path), a join (general path) */
    static const char *OTHER[] = {
        "SELECT t.id, t.vc FROM dbo.[all] AS t WHERE t.id >= 2",
        "SELECT id, nn, CAST(NULL AS bigint) AS x FROM dbo.[all] WHERE id IS NOT NULL AND id <= 5",
        "SELECT t.vc, t.id FROM [dbo].[all] t WHERE (t.id = 3 OR t.id = 2 OR t.id IS NULL)",
        "SELECT t.id FROM dbo.[all] AS t WHERE t.id > 1 AND t.id > 2 AND t.id < 9",
    };
    check_served(srv, s, OTHER, sizeof OTHER / sizeof OTHER[0], 1);
    static const char *GENERAL[] = {
        "SELECT t.id + 1 FROM dbo.[all] AS t",
        "SELECT t.id FROM dbo.[all] AS t WHERE t.id = 1 OR t.id = 5",  /* two ranges */
        "SELECT t.id FROM dbo.[all] AS t WHERE t.vc = 'x'",            /* not an integer key */
        "SELECT t.id FROM dbo.[all] AS t ORDER BY t.id",
        "SELECT TOP (2) t.id FROM dbo.[all] AS t",
        "SELECT a.id FROM dbo.[all] AS a JOIN dbo.[all] AS b ON b.id = a.id",
    };
    check_served(srv, s, GENERAL, sizeof GENERAL / sizeof GENERAL[0], 0);
    /* the store off: the general path alone */
    sim_server_set_table_cache_mb(srv, 0);
    snap_sql(&q, "all", ALL, present, NA, NULL, false, 0, false, 0, false, false);
    CHECK_EQ_INT(tcompare(srv, s, (const char *)q.data, &served, NULL), 1);
    CHECK_EQ_INT(served, 0);
    sim_server_set_table_cache_mb(srv, SIM_TABLE_CACHE_MB_DEFAULT);
    mcdc_buf_free(&q);
    tfix_close(&f);
}

/* Heaps (no index: SQLite scans in rowid order, the store's), NULL keys,
 * keys out of rowid order, a UNIQUE column, a key-only table. */
TEST(sim_fast_table_heaps_and_key_orders) {
    tfix f;
    if (!tfix_open(&f,
                   "CREATE DATABASE lab; USE lab;"
                   " CREATE TABLE dbo.h1 (k int NULL, v nvarchar(10) NULL);"
                   " INSERT INTO dbo.h1 VALUES (NULL, N'a'), (NULL, N'b'), (1, N'c'), (2, NULL), (2, N'e'), (5, N'f');"
                   " CREATE TABLE dbo.h2 (k bigint NULL, v int NOT NULL);"
                   " INSERT INTO dbo.h2 VALUES (9, 1), (NULL, 2), (-3, 3), (4, 4), (NULL, 5), (0, 6);"
                   " CREATE TABLE dbo.u (id int NOT NULL PRIMARY KEY, code varchar(10) NOT NULL UNIQUE, n smallint NULL);"
                   " INSERT INTO dbo.u VALUES (3, 'z', 1), (1, 'y', NULL), (2, 'a', -7);"
                   " CREATE TABLE dbo.k1 (id int NOT NULL PRIMARY KEY);"
                   " INSERT INTO dbo.k1 VALUES (1), (2), (3), (10)"))
        return;
    coll *c = f.c;
    sim_server *srv = f.srv;
    sim_session *s = f.s;
    static const char *H[] = {"k", "v"}, *U[] = {"id", "code", "n"}, *K1[] = {"id"};
    bool present[4] = {true, true, true, true};
    mcdc_buf q = {0};
    int64_t served = 0;
    struct { const char *t; const char *const *cols; int n; const char *key; bool lo; int64_t l; bool hi; int64_t h;
             int served, rows; } C[] = {
        {"h1", H, 2, NULL, false, 0, false, 0, 1, 6},
        {"h1", H, 2, "k", false, 0, true, 2, 1, 3},   /* NULLs and k < 2 */
        {"h1", H, 2, "k", true, 2, true, 6, 1, 3},
        {"h2", H, 2, NULL, false, 0, false, 0, 1, 6}, /* a whole read builds the store */
        {"h2", H, 2, "k", false, 0, true, 1, 1, 4},   /* no index: the rowid order whatever the keys */
        {"h2", H, 2, "k", true, -3, false, 0, 1, 4},
        {"u", U, 3, NULL, false, 0, false, 0, 1, 3},
        {"u", U, 3, "id", true, 2, false, 0, 0, 2},  /* the key's index orders: SQLite */
        {"u", U, 3, "n", true, -10, true, 5, 1, 2},   /* no index on n; a lo: no NULLs */
        {"k1", K1, 1, NULL, false, 0, false, 0, 1, 4}, /* the covering index grows with the rowid */
        {"k1", K1, 1, "id", true, 2, true, 4, 1, 2},
    };
    for (size_t k = 0; k < sizeof C / sizeof C[0]; k++) {
        snap_sql(&q, C[k].t, C[k].cols, present, C[k].n, C[k].key, C[k].lo, C[k].l, C[k].hi, C[k].h, false, false);
        CHECK_EQ_INT(tcompare(srv, s, (const char *)q.data, &served, NULL), 1);
        CHECK_EQ_INT(served, C[k].served);
        CHECK_EQ_INT(nrows(s, c, (const char *)q.data), C[k].rows);
    }
    mcdc_buf_free(&q);
    tfix_close(&f);
}

/* READ COMMITTED waits as the general path does, SNAPSHOT reads its pinned
 * state from the store unless another transaction changed the table. */
TEST(sim_fast_table_isolation) {
    tfix f;
    if (!tfix_open(&f,
                   "CREATE DATABASE lab; ALTER DATABASE lab SET ALLOW_SNAPSHOT_ISOLATION ON; USE lab;"
                   " CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, v varchar(10) NULL);"
                   " INSERT INTO dbo.t VALUES (1, 'a'), (2, 'b'), (3, 'c')"))
        return;
    coll *c = f.c;
    sim_server *srv = f.srv;
    sim_session *s = f.s, *w = NULL;
    w = test_login(srv, "sa", "Sa_Passw0rd", "lab");
    static const char *T[] = {"id", "v"};
    bool present[2] = {true, true};
    mcdc_buf q = {0}, a = {0};
    int64_t served = 0;
    snap_sql(&q, "t", T, present, 2, NULL, false, 0, false, 0, true, false);
    CHECK_EQ_INT(tcompare(srv, s, (const char *)q.data, &served, NULL), 1);
    CHECK_EQ_INT(served, 1);
    wire_run(s, (const char *)q.data, &a); /* the committed rows' reply */
    /* another transaction changed the table: SNAPSHOT reads the view
     * (SQLite), the same bytes as before; READ COMMITTED waits (1222) */
    run(w, c, "BEGIN TRAN; UPDATE dbo.t SET v = 'x' WHERE id = 2");
    mcdc_buf b = {0};
    int64_t q0 = srv->table_queries;
    wire_run(s, (const char *)q.data, &b);
    CHECK_EQ_INT(srv->table_queries - q0, 0);
    CHECK(a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
    snap_sql(&q, "t", T, present, 2, NULL, false, 0, false, 0, false, false);
    run(s, c, "SET LOCK_TIMEOUT 0");
    run(s, c, (const char *)q.data);
    CHECK_EQ_INT(c->err_number, 1222);
    run(w, c, "COMMIT");
    CHECK_EQ_INT(tcompare(srv, s, (const char *)q.data, &served, NULL), 1);
    CHECK_EQ_INT(served, 1);
    run(s, c, (const char *)q.data);
    CHECK_EQ_STR(c->rows[1], "2|x");
    mcdc_buf_free(&q);
    mcdc_buf_free(&a);
    mcdc_buf_free(&b);
    sim_session_close(w);
    tfix_close(&f);
}

/* sim.bulk_load_table: the rows a pure function of the seed, the key
 * ascending from @first_key, the table store handed the same rows (the
 * first read needs no build: the same bytes as the general path). */
TEST(sim_bulk_load_table) {
    tfix f;
    if (!tfix_open(&f,
                   "CREATE DATABASE lab; USE lab;"
                   " CREATE TABLE dbo.b (id bigint NOT NULL PRIMARY KEY, i int NULL, amount decimal(18,4) NULL, name nvarchar(50) NULL,"
                   " at datetime2(7) NULL, flag bit NULL, raw varbinary(16) NULL, g uniqueidentifier NULL, note varchar(200) NOT NULL,"
                   " d date NULL, f float NULL, m money NULL, dto datetimeoffset(2) NULL, t time(3) NULL, c char(6) NULL);"
                   " EXEC sim.bulk_load_table @table = N'dbo.b', @rows = 5000, @seed = 7, @first_key = 100"))
        return;
    coll *c = f.c;
    sim_server *srv = f.srv;
    sim_session *s = f.s;
    CHECK_EQ_STR(scalar(s, c, "SELECT CONCAT(MIN(id), ':', MAX(id), ':', COUNT(*), ':', COUNT(note)) FROM dbo.b"), "100:5099:5000:5000");
    int nulls = atoi(scalar(s, c, "SELECT COUNT(*) - COUNT(name) FROM dbo.b"));
    CHECK(nulls > 500 && nulls < 1500); /* about one row of five */
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM cdc.lsn_time_mapping"), "0");
    /* the store came with the load: the first read is served, no build */
    static const char *B[] = {"id", "i", "amount", "name", "at", "flag", "raw", "g", "note", "d", "f", "m", "dto", "t", "c"};
    bool present[15];
    for (int k = 0; k < 15; k++) present[k] = true;
    mcdc_buf q = {0};
    int64_t served = 0;
    CHECK(sim_stores_table_bytes(srv->stores) > 0);
    snap_sql(&q, "b", B, present, 15, "id", true, 1000, true, 1100, false, false);
    CHECK_EQ_INT(tcompare(srv, s, (const char *)q.data, &served, NULL), 1);
    CHECK_EQ_INT(served, 1);
    snap_sql(&q, "b", B, present, 15, NULL, false, 0, false, 0, false, false);
    CHECK_EQ_INT(tcompare(srv, s, (const char *)q.data, &served, NULL), 1);
    /* the same seed gives the same rows; a second load appends after them */
    char sum1[200];
    snprintf(sum1, sizeof sum1, "%.199s", scalar(s, c, "SELECT CONCAT(SUM(i), ':', COUNT(g), ':', MAX(name), ':', MIN(at)) FROM dbo.b"));
    run(s, c, "CREATE TABLE dbo.b2 (id bigint NOT NULL PRIMARY KEY, i int NULL, amount decimal(18,4) NULL, name nvarchar(50) NULL,"
              " at datetime2(7) NULL, flag bit NULL, raw varbinary(16) NULL, g uniqueidentifier NULL, note varchar(200) NOT NULL,"
              " d date NULL, f float NULL, m money NULL, dto datetimeoffset(2) NULL, t time(3) NULL, c char(6) NULL);"
              " EXEC sim.bulk_load_table @table = N'dbo.b2', @rows = 5000, @seed = 7, @first_key = 100");
    CHECK_EQ_STR(scalar(s, c, "SELECT CONCAT(SUM(i), ':', COUNT(g), ':', MAX(name), ':', MIN(at)) FROM dbo.b2"), sum1);
    char same[200];
    snprintf(same, sizeof same, "%.199s", scalar(s, c, "SELECT COUNT(*) FROM dbo.b WHERE amount IS NOT NULL AND raw IS NOT NULL"));
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM dbo.b2 AS x JOIN dbo.b AS y ON y.id = x.id AND y.amount = x.amount"
                              " AND y.raw = x.raw"), same);
    run(s, c, "EXEC sim.bulk_load_table @table = N'dbo.b', @rows = 10, @seed = 8");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(scalar(s, c, "SELECT CONCAT(MIN(id), ':', MAX(id), ':', COUNT(*)) FROM dbo.b"), "100:5109:5010");
    CHECK_EQ_INT(tcompare(srv, s, (const char *)q.data, &served, NULL), 1); /* rebuilt from SQLite */
    CHECK_EQ_INT(served, 1);
    /* refusals: a key that does not fit, a key of another type, no such
     * table, inside a transaction, another session's open transaction */
    run(s, c, "CREATE TABLE dbo.tiny (id tinyint NOT NULL PRIMARY KEY, v int NULL);"
              " EXEC sim.bulk_load_table @table = N'dbo.tiny', @rows = 300, @seed = 1");
    CHECK_EQ_INT(c->err_number, 50000);
    CHECK(strstr(c->err_text, "do not fit") != NULL);
    run(s, c, "CREATE TABLE dbo.sk (code varchar(10) NOT NULL PRIMARY KEY); EXEC sim.bulk_load_table @table = N'dbo.sk', @rows = 1");
    CHECK(strstr(c->err_text, "not an integer column") != NULL);
    run(s, c, "EXEC sim.bulk_load_table @table = N'dbo.nosuch', @rows = 1");
    CHECK_EQ_INT(c->err_number, 208);
    run(s, c, "BEGIN TRAN; EXEC sim.bulk_load_table @table = N'dbo.b', @rows = 1; ROLLBACK");
    CHECK(strstr(c->err_text, "inside a transaction") != NULL);
    sim_session *w = test_login(srv, "sa", "Sa_Passw0rd", "lab");
    run(w, c, "BEGIN TRAN; UPDATE dbo.b SET i = 1 WHERE id = 100");
    run(s, c, "EXEC sim.bulk_load_table @table = N'dbo.b', @rows = 1");
    CHECK(strstr(c->err_text, "another session has a transaction open") != NULL);
    run(w, c, "ROLLBACK");
    /* a heap gets no key: every column generated */
    run(s, c, "CREATE TABLE dbo.hp (a int NULL, b nvarchar(8) NULL); EXEC sim.bulk_load_table @table = N'dbo.hp', @rows = 100, @seed = 3");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM dbo.hp"), "100");
    sim_session_close(w);
    mcdc_buf_free(&q);
    tfix_close(&f);
}

/* A ranged read (a point lookup, one partition of several) never builds
 * the store: it would pay for the rows it does not read; a read of the whole
 * table does, and ranged reads use it until a write drops it. */
TEST(sim_fast_table_built_by_whole_reads) {
    tfix f;
    if (!tfix_open(&f, "CREATE DATABASE lab; USE lab; CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, v int NULL);"
                       " INSERT INTO dbo.t VALUES (1, 1), (2, 2), (3, 3)"))
        return;
    coll *c = f.c;
    sim_server *srv = f.srv;
    sim_session *s = f.s;
    static const char *T[] = {"id", "v"};
    bool present[2] = {true, true};
    mcdc_buf q = {0}, w = {0};
    int64_t served = 0;
    snap_sql(&q, "t", T, present, 2, "id", true, 2, false, 0, false, false);
    snap_sql(&w, "t", T, present, 2, NULL, false, 0, false, 0, false, false);
    CHECK_EQ_INT(tcompare(srv, s, (const char *)q.data, &served, NULL), 1);
    CHECK_EQ_INT(served, 0); /* no store: SQLite */
    CHECK(sim_stores_table_bytes(srv->stores) == 0);
    CHECK_EQ_INT(tcompare(srv, s, (const char *)w.data, &served, NULL), 1);
    CHECK_EQ_INT(served, 1); /* built */
    CHECK(sim_stores_table_bytes(srv->stores) > 0);
    CHECK_EQ_INT(tcompare(srv, s, (const char *)q.data, &served, NULL), 1);
    CHECK_EQ_INT(served, 1);
    run(s, c, "UPDATE dbo.t SET v = 9 WHERE id = 3");
    CHECK(sim_stores_table_bytes(srv->stores) == 0); /* dropped at once */
    CHECK_EQ_INT(tcompare(srv, s, (const char *)q.data, &served, NULL), 1);
    CHECK_EQ_INT(served, 0);
    CHECK_EQ_INT(tcompare(srv, s, (const char *)w.data, &served, NULL), 1);
    CHECK_EQ_INT(served, 1);
    run(s, c, (const char *)q.data);
    CHECK_EQ_STR(c->rows[1], "3|9");
    mcdc_buf_free(&q);
    mcdc_buf_free(&w);
    tfix_close(&f);
}

/* The planner's count per slice of key in [*from, *to) (NULL: open), the
 * text mcdc_cdc_key_slices sends (caught by the scripted connection). */
static void slices_sql(mcdc_buf *out, const char *tbl, const char *key, int64_t w, const int64_t *from, const int64_t *to,
                       bool snapshot) {
    fake_db *f = fake_new();
    mcdc_conn *conn = fake_connect(f);
    mcdc_cdc_client *cl = NULL;
    CHECK_EQ_INT(mcdc_cdc_client_create(&cl, conn, NULL), MCDC_OK);
    fake_reply(f, "GROUP BY", "b:i64,n:i64", "");
    mcdc_key_col k;
    memset(&k, 0, sizeof k);
    snprintf(k.name, sizeof k.name, "%s", key);
    snprintf(k.type, sizeof k.type, "bigint");
    k.kind = MCDC_KEY_INT;
    mcdc_source_read rd = {snapshot, snapshot ? 0 : -1};
    mcdc_key_slice *v = NULL;
    int n = -1;
    CHECK_EQ_INT(mcdc_cdc_key_slices(&v, &n, cl, "dbo", tbl, &k, w, from, to, &rd, NULL), MCDC_OK);
    CHECK_EQ_INT(n, 0);
    mcdc_free(v);
    mcdc_buf_reset(out);
    const char *sql = fake_sql(f, 0);
    CHECK(sql != NULL);
    if (sql) mcdc_buf_append(out, sql, strlen(sql) + 1, NULL);
    mcdc_cdc_client_free(cl);
    mcdc_conn_close(conn);
    fake_free(f);
}

/* A chunk planner's counts per slice of the key (mcdc_cdc_key_slices'
 * query) come from the store when the key grows with the rowid: the same
 * groups (floor(k / w), ascending; a NULL group first when the WHERE
 * admits NULL keys) and bytes as SQLite's GROUP BY, under READ COMMITTED
 * and SNAPSHOT, keys at both ends of bigint. */
TEST(sim_fast_table_slice_counts) {
    tfix f;
    if (!tfix_open(&f, "CREATE DATABASE lab; ALTER DATABASE lab SET ALLOW_SNAPSHOT_ISOLATION ON; USE lab;"
                       " CREATE TABLE dbo.h (k bigint NULL, v int NULL);"
                       " INSERT INTO dbo.h VALUES (NULL, 1), (NULL, 2), (-9, 3), (-4, 4), (-3, 5), (0, 6), (1, 7), (1, 8),"
                       " (2, 9), (5, 10), (6, 11), (7, 12), (20, 13), (21, 14), (1000, 15);"
                       " CREATE TABLE dbo.x (k bigint NULL);"
                       " INSERT INTO dbo.x VALUES (-9223372036854775807 - 1), (-9223372036854775807), (-1), (0),"
                       " (9223372036854775806), (9223372036854775807);"
                       " CREATE TABLE dbo.b (id int NOT NULL PRIMARY KEY, x int NULL);"
                       " EXEC sim.bulk_load_table @table = N'dbo.b', @rows = 3000, @seed = 2"))
        return;
    coll *c = f.c;
    sim_server *srv = f.srv;
    sim_session *s = f.s;
    static const char *H[] = {"k", "v"};
    bool present[2] = {true, true};
    mcdc_buf q = {0};
    int64_t served = 0;
    snap_sql(&q, "h", H, present, 2, NULL, false, 0, false, 0, false, false);
    CHECK_EQ_INT(tcompare(srv, s, (const char *)q.data, &served, NULL), 1); /* builds the store */
    CHECK_EQ_INT(served, 1);
    snap_sql(&q, "x", H, present, 1, NULL, false, 0, false, 0, false, false);
    CHECK_EQ_INT(tcompare(srv, s, (const char *)q.data, &served, NULL), 1);
    CHECK_EQ_INT(served, 1);
    int64_t m5 = -5, p21 = 21, p6 = 6, m10 = -10, p100 = 100, m100 = -100, p3001 = 3001, p2990 = 2990;
    struct { const char *t, *k; int64_t w; const int64_t *from, *to; int rows; const char *first, *last; } S[] = {
        {"h", "k", 4, NULL, NULL, 6, "-3|1", "250|1"}, /* -9: floor(-9 / 4) = -3 */
        {"h", "k", 4, &m5, &p21, 4, "-1|2", "5|1"},
        {"h", "k", 1, NULL, &p6, 7, "-9|1", "5|1"},
        {"h", "k", 7, &m10, NULL, 7, "-2|1", "142|1"},
        {"h", "k", 100, &p100, NULL, 1, "10|1", "10|1"},
        {"h", "k", 1000000, NULL, &m100, 0, NULL, NULL},
        {"h", "k", INT64_MAX, NULL, NULL, 2, "-1|3", "0|10"},
        {"x", "k", 16, NULL, NULL, 4, "-576460752303423488|2", "576460752303423487|2"},
        {"x", "k", 3, NULL, NULL, 4, "-3074457345618258603|2", "3074457345618258602|2"},
        {"x", "k", INT64_MAX, NULL, NULL, 4, "-2|1", "1|1"}, /* MIN / MAX floors to -2 */
        {"x", "k", 1, &m10, NULL, 4, "-1|1", "9223372036854775807|1"},
        {"b", "id", 250, NULL, &p3001, 13, "0|249", "12|1"},
        {"b", "id", 1, &p2990, NULL, 11, "2990|1", "3000|1"},
    };
    for (size_t k = 0; k < sizeof S / sizeof S[0]; k++)
        for (int iso = 0; iso < 2; iso++) {
            slices_sql(&q, S[k].t, S[k].k, S[k].w, S[k].from, S[k].to, iso == 1);
            CHECK_EQ_INT(tcompare(srv, s, (const char *)q.data, &served, NULL), 1);
            CHECK_EQ_INT(served, 1);
            run(s, c, (const char *)q.data);
            CHECK_EQ_INT(c->nerrors, 0);
            CHECK_EQ_INT(c->nrows, S[k].rows);
            if (S[k].rows > 0 && c->nrows == S[k].rows) {
                CHECK_EQ_STR(c->rows[0], S[k].first);
                CHECK_EQ_STR(c->rows[S[k].rows - 1], S[k].last);
            }
        }
    /* the same shape written by hand: any case, other names, the NULL keys
     * admitted (their group first) */
    static const char *SAME[] = {
        "select [__$b], count_big(*) from (select case when cast(k as bigint) >= 0 then cast(k as bigint) / cast(4 as bigint)"
        " else (cast(k as bigint) + 1) / cast(4 as bigint) - 1 end as [__$b] from dbo.h) x group by [__$b]",
        "SELECT s AS slice, COUNT_BIG(*) AS n FROM (SELECT CASE WHEN CAST([k] AS bigint) >= 0 THEN CAST([k] AS bigint) /"
        " CAST(3 AS bigint) ELSE (CAST([k] AS bigint) + 1) / CAST(3 AS bigint) - 1 END AS s FROM [dbo].[h]"
        " WHERE ([k] IS NULL OR [k] < 6)) AS x GROUP BY s",
    };
    check_served(srv, s, SAME, sizeof SAME / sizeof SAME[0], 1);
    run(s, c, SAME[1]);
    CHECK_EQ_INT(c->nrows, 6);
    CHECK_EQ_STR(c->rows[0], "NULL|2");
    CHECK_EQ_STR(c->rows[1], "-3|1"); /* -9 */
    CHECK_EQ_STR(c->rows[2], "-2|1"); /* -4 */
    CHECK_EQ_STR(c->rows[3], "-1|1"); /* -3 */
    CHECK_EQ_STR(c->rows[4], "0|4");  /* 0, 1, 1, 2 */
    CHECK_EQ_STR(c->rows[5], "1|1");  /* 3 <= k < 6: 5 */
    /* the general path: another width in the ELSE, a width of 0, another
     * aggregate, an ORDER BY, a key that does not grow with the rowid */
    static const char *G[] = {
        "SELECT [__$b] AS b, COUNT_BIG(*) AS n FROM (SELECT CASE WHEN CAST([k] AS bigint) >= 0 THEN CAST([k] AS bigint) /"
        " CAST(4 AS bigint) ELSE (CAST([k] AS bigint) + 1) / CAST(5 AS bigint) - 1 END AS [__$b] FROM [dbo].[h]) AS x"
        " GROUP BY [__$b]",
        "SELECT [__$b] AS b, COUNT_BIG(*) AS n FROM (SELECT CASE WHEN CAST([k] AS bigint) >= 0 THEN CAST([k] AS bigint) /"
        " CAST(0 AS bigint) ELSE (CAST([k] AS bigint) + 1) / CAST(0 AS bigint) - 1 END AS [__$b] FROM [dbo].[h]) AS x"
        " GROUP BY [__$b]",
        "SELECT [__$b] AS b, COUNT(*) AS n FROM (SELECT CASE WHEN CAST([k] AS bigint) >= 0 THEN CAST([k] AS bigint) /"
        " CAST(4 AS bigint) ELSE (CAST([k] AS bigint) + 1) / CAST(4 AS bigint) - 1 END AS [__$b] FROM [dbo].[h]) AS x"
        " GROUP BY [__$b]",
        "SELECT [__$b] AS b, COUNT_BIG(*) AS n FROM (SELECT CASE WHEN CAST([k] AS bigint) >= 0 THEN CAST([k] AS bigint) /"
        " CAST(4 AS bigint) ELSE (CAST([k] AS bigint) + 1) / CAST(4 AS bigint) - 1 END AS [__$b] FROM [dbo].[h]) AS x"
        " GROUP BY [__$b] ORDER BY [__$b] DESC",
        "SELECT [__$b] AS b, COUNT_BIG(*) AS n FROM (SELECT CASE WHEN CAST([v] AS bigint) >= 0 THEN CAST([k] AS bigint) /"
        " CAST(4 AS bigint) ELSE (CAST([k] AS bigint) + 1) / CAST(4 AS bigint) - 1 END AS [__$b] FROM [dbo].[h]) AS x"
        " GROUP BY [__$b]",
    };
    check_served(srv, s, G, sizeof G / sizeof G[0], 0);
    run(s, c, "INSERT INTO dbo.h VALUES (-50, 0)"); /* below 1000: the key no longer grows with the rowid */
    snap_sql(&q, "h", H, present, 2, NULL, false, 0, false, 0, false, false);
    CHECK_EQ_INT(tcompare(srv, s, (const char *)q.data, &served, NULL), 1);
    CHECK_EQ_INT(served, 1); /* rebuilt */
    slices_sql(&q, "h", "k", 4, NULL, NULL, false);
    CHECK_EQ_INT(tcompare(srv, s, (const char *)q.data, &served, NULL), 1);
    CHECK_EQ_INT(served, 0);
    run(s, c, (const char *)q.data);
    CHECK_EQ_INT(c->nrows, 7);
    CHECK_EQ_STR(c->rows[0], "-13|1");
    mcdc_buf_free(&q);
    tfix_close(&f);
}
