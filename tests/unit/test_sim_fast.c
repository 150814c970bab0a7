/* test_sim_fast.c - the change-table read fast path answers the reader's
 * query (built by mcdc_cdc_changes_sql, as the reader sends it) with the
 * same columns, types, rows and values as the general path: every type,
 * NULLs, absent columns (CAST(NULL AS ..)), the resume ("after") clause,
 * commit times under a zone, a purged range. */
#include "mcdc_cdc_client.h"
#include "sim_engine_int.h"
#include "test_sim_helpers.h"
#include "test_sim_wire.h"

#define FAST_ROWS_MAX 200

typedef struct snap {
    int nrows, ncols, nerrors;
    char colnames[256];
    sim_type types[64];
    bool nullable[64];
    char rows[FAST_ROWS_MAX][COLL_CELL];
} snap;

static void take(snap *o, const coll *c) {
    memset(o, 0, sizeof *o);
    o->nrows = c->nrows;
    o->ncols = c->ncols;
    o->nerrors = c->nerrors;
    snprintf(o->colnames, sizeof o->colnames, "%.255s", c->colnames);
    for (int k = 0; k < c->ncols && k < 64; k++) { o->types[k] = c->cols[k].type; o->nullable[k] = c->cols[k].nullable; }
    for (int r = 0; r < c->nrows && r < FAST_ROWS_MAX; r++) memcpy(o->rows[r], c->rows[r], COLL_CELL);
}

/* Runs sql with the fast path on and off; checks both answers agree.
 * Returns the number of rows (fast path). */
static int compare_paths(sim_server *srv, sim_session *s, coll *c, const char *sql, snap *a, snap *b) {
    int64_t hits0 = srv->fast_queries;
    run(s, c, "EXEC sim.set_fast_path @on = 1");
    run(s, c, sql);
    take(a, c);
    CHECK_EQ_INT((int)(srv->fast_queries - hits0), 1); /* served by the fast path */
    run(s, c, "EXEC sim.set_fast_path @on = 0");
    int64_t hits1 = srv->fast_queries;
    run(s, c, sql);
    take(b, c);
    CHECK_EQ_INT((int)(srv->fast_queries - hits1), 0);
    run(s, c, "EXEC sim.set_fast_path @on = 1");
    CHECK_EQ_INT(a->nerrors, 0);
    CHECK_EQ_INT(b->nerrors, 0);
    CHECK_EQ_INT(a->nrows, b->nrows);
    CHECK_EQ_INT(a->ncols, b->ncols);
    CHECK_EQ_STR(a->colnames, b->colnames);
    for (int k = 0; k < a->ncols && k < 64; k++) {
        CHECK_EQ_INT(a->types[k].id, b->types[k].id);
        CHECK_EQ_INT(a->types[k].length, b->types[k].length);
        CHECK_EQ_INT(a->types[k].precision, b->types[k].precision);
        CHECK_EQ_INT(a->types[k].scale, b->types[k].scale);
        CHECK(a->nullable[k] == b->nullable[k]);
    }
    for (int r = 0; r < a->nrows && r < FAST_ROWS_MAX; r++) {
        bool same = strcmp(a->rows[r], b->rows[r]) == 0;
        CHECK(same);
        if (!same) fprintf(stderr, "  row %d\n   fast:    %s\n   general: %s\n", r, a->rows[r], b->rows[r]);
    }
    return a->nrows;
}

TEST(sim_fast_path_matches_general_path) {
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    snap *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    test_tmpdir(dir, sizeof dir);
    sim_config cfg = {dir, "Sa_Passw0rd", "E. South America Standard Time", 16, 0, 0, 500};
    sim_server *srv = NULL;
    mcdc_error err = MCDC_ERROR_INIT;
    CHECK_EQ_INT(sim_server_open(&srv, &cfg, &err), MCDC_OK);
    sim_session *s = test_login(srv, "sa", "Sa_Passw0rd", NULL);
    run(s, c, "CREATE DATABASE lab; USE lab;"
              " CREATE TABLE dbo.[all] (id int NOT NULL PRIMARY KEY, b bit NULL, ti tinyint NULL, si smallint NULL,"
              " bi bigint NULL, r real NULL, f float NULL, d decimal(38,4) NULL, m money NULL, sm smallmoney NULL,"
              " dt date NULL, tm time(7) NULL, dtm datetime NULL, sdt smalldatetime NULL, d2 datetime2(7) NULL,"
              " dto datetimeoffset(3) NULL, ch char(4) NULL, vc varchar(20) NULL, nc nchar(3) NULL, nv nvarchar(max) NULL,"
              " bn binary(4) NULL, vb varbinary(8) NULL, g uniqueidentifier NULL);"
              " EXEC sys.sp_cdc_enable_db;"
              " EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'all', @role_name = NULL");
    CHECK_EQ_INT(c->nerrors, 0);
    run(s, c, "INSERT INTO dbo.[all] VALUES (1, 1, 255, -32768, 9223372036854775807, 1.5, -2.25, 12345678901234567890.1234,"
              " 922337203685477.5807, -214748.3648, '2024-02-29', '23:59:59.1234567', '2024-01-15 10:30:00.997',"
              " '2024-01-15 10:30:00', '2024-07-15 10:30:00.1234567', '2024-03-01 10:00:00.123 +05:30', 'ab', 'caf',"
              " N'東京', N'naïve Ωmega', 0x01020304, 0x0A0B, '6F9619FF-8B86-D011-B42D-00C04FC964FF');"
              " INSERT INTO dbo.[all] (id) VALUES (2);"
              " BEGIN TRAN; UPDATE dbo.[all] SET vc = 'x', nv = NULL WHERE id = 1; INSERT INTO dbo.[all] (id, vc) VALUES (3, 'three');"
              " DELETE FROM dbo.[all] WHERE id = 2; COMMIT;"
              " UPDATE dbo.[all] SET id = 4 WHERE id = 3;"
              " EXEC sim.run_capture");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM cdc.dbo_all_CT"), "8");
    char lo[64], hi[64];
    snprintf(lo, sizeof lo, "%.63s", scalar(s, c, "SELECT CONVERT(varchar(22), sys.fn_cdc_get_min_lsn(N'dbo_all'), 1)"));
    snprintf(hi, sizeof hi, "%.63s", scalar(s, c, "SELECT CONVERT(varchar(22), sys.fn_cdc_get_max_lsn(), 1)"));
    static const char *NAMES[] = {"id", "b", "ti", "si", "bi", "r", "f", "d", "m", "sm", "dt", "tm", "dtm", "sdt",
                                  "d2", "dto", "ch", "vc", "nc", "nv", "bn", "vb", "g", "gone"};
    enum { NF = 24 };
    mcdc_field f[NF];
    bool present[NF];
    memset(f, 0, sizeof f);
    for (int k = 0; k < NF; k++) { f[k].name = (char *)NAMES[k]; f[k].type = MCDC_TYPE_UTF8; f[k].nullable = true; present[k] = true; }
    present[NF - 1] = false; /* a column the instance does not have: CAST(NULL AS ..) */
    f[NF - 1].type = MCDC_TYPE_INT32;
    mcdc_buf q = {0};
    mcdc_clock utc = {MCDC_CLOCK_UTC, "", 0}, zone = {MCDC_CLOCK_ZONE, "E. South America Standard Time", 0},
               fixed = {MCDC_CLOCK_FIXED, "", -180};
    const mcdc_clock *clocks[] = {&utc, &zone, &fixed};
    for (int k = 0; k < 3; k++)
        for (int cmd = 0; cmd < 2; cmd++) {
            reader_sql(&q, f, present, NF, cmd != 0, clocks[k], lo, hi, NULL);
            CHECK_EQ_INT(compare_paths(srv, s, c, (const char *)q.data, a, b), 8);
        }
    /* values made it through unchanged: spot checks on the fast answer */
    reader_sql(&q, f, present, NF, true, &zone, lo, hi, NULL);
    compare_paths(srv, s, c, (const char *)q.data, a, b);
    CHECK(strstr(a->rows[0], "|12345678901234567890.1234|") != NULL);
    CHECK(strstr(a->rows[0], "|6F9619FF-8B86-D011-B42D-00C04FC964FF|NULL") != NULL);
    CHECK(strncmp(a->rows[0], lo, 2) == 0);
    CHECK_EQ_INT(a->types[4].id, SIM_T_DATETIME2);
    /* resume after the first row (the reader's keyset clause) */
    mcdc_row_key after;
    memset(&after, 0, sizeof after);
    char k0[COLL_CELL];
    snprintf(k0, sizeof k0, "%s", a->rows[0]);
    char *bar1 = strchr(k0, '|'), *bar2 = bar1 ? strchr(bar1 + 1, '|') : NULL;
    CHECK(bar1 && bar2);
    if (bar1 && bar2) {
        *bar1 = 0;
        *bar2 = 0;
        mcdc_lsn_parse_cstr(&after.start_lsn, k0, NULL);
        mcdc_lsn_parse_cstr(&after.seqval, bar1 + 1, NULL);
        after.operation = atoi(bar2 + 1);
        after.command_id = 1;
        reader_sql(&q, f, present, NF, true, &utc, lo, hi, &after);
        CHECK_EQ_INT(compare_paths(srv, s, c, (const char *)q.data, a, b), 7);
    }
    /* an empty range (from > to), then a purged range */
    reader_sql(&q, f, present, NF, true, &utc, hi, lo, NULL);
    CHECK_EQ_INT(compare_paths(srv, s, c, (const char *)q.data, a, b), 0);
    char cl[512];
    snprintf(cl, sizeof cl, "DECLARE @lw binary(10) = CONVERT(binary(10), '%s', 1);"
                            " EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_all', @low_water_mark = @lw, @threshold = 5000", hi);
    run(s, c, cl);
    CHECK_EQ_INT(c->nerrors, 0);
    reader_sql(&q, f, present, NF, true, &zone, lo, hi, NULL);
    CHECK_EQ_INT(compare_paths(srv, s, c, (const char *)q.data, a, b), 2);
    /* a repeat is served from the session's prepared statements; a schema
     * change drops them (the answer stays the general path's) */
    int64_t hits = srv->fast_cache_hits;
    reader_sql(&q, f, present, NF, false, &fixed, lo, hi, NULL);
    run(s, c, (const char *)q.data);
    run(s, c, (const char *)q.data);
    CHECK_EQ_INT((int)(srv->fast_cache_hits - hits), 1);
    CHECK_EQ_INT(c->nrows, 2);
    run(s, c, "CREATE TABLE dbo.other (id int NOT NULL PRIMARY KEY)");
    hits = srv->fast_cache_hits;
    CHECK_EQ_INT(compare_paths(srv, s, c, (const char *)q.data, a, b), 2);
    CHECK_EQ_INT((int)(srv->fast_cache_hits - hits), 0);
    /* USE elsewhere and back: the entry belonged to the old connection */
    run(s, c, (const char *)q.data);
    run(s, c, "USE master; USE lab");
    hits = srv->fast_cache_hits;
    CHECK_EQ_INT(compare_paths(srv, s, c, (const char *)q.data, a, b), 2);
    CHECK_EQ_INT((int)(srv->fast_cache_hits - hits), 0);
    /* a shape the fast path does not take goes the general way */
    int64_t h = srv->fast_queries;
    run(s, c, "SELECT c.id FROM cdc.[dbo_all_CT] AS c INNER JOIN cdc.lsn_time_mapping AS m ON m.start_lsn = c.__$start_lsn"
              " WHERE m.tran_id IS NOT NULL ORDER BY c.__$start_lsn");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_INT(c->nrows, 2);
    CHECK_EQ_INT((int)(srv->fast_queries - h), 0);
    mcdc_buf_free(&q);
    sim_session_close(s);
    sim_server_close(srv);
    test_rmdir(dir);
    free(a);
    free(b);
    free(c);
}

/* The reader's split-point query (mcdc_cdc_split_points' text): NTILE tiles
 * of a range, the same on both paths for any tile count, fewer rows than
 * tiles, an empty range. */
TEST(sim_fast_split_points_match_general_path) {
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    snap *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    test_tmpdir(dir, sizeof dir);
    sim_server *srv = test_server(dir, 0);
    sim_session *s = test_login(srv, "sa", "Sa_Passw0rd", NULL);
    run(s, c, "CREATE DATABASE lab; USE lab; CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, v nvarchar(20) NULL);"
              " EXEC sys.sp_cdc_enable_db; EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL;"
              " EXEC sim.bulk_load @capture_instance = N'dbo_t', @transactions = 37, @rows_per_tx = 3, @seed = 5");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM cdc.dbo_t_CT"), "111");
    char lo[64], hi[64], mid[64];
    snprintf(lo, sizeof lo, "%.63s", scalar(s, c, "SELECT CONVERT(varchar(22), MIN(__$start_lsn), 1) FROM cdc.dbo_t_CT"));
    snprintf(hi, sizeof hi, "%.63s", scalar(s, c, "SELECT CONVERT(varchar(22), MAX(__$start_lsn), 1) FROM cdc.dbo_t_CT"));
    snprintf(mid, sizeof mid, "%.63s", scalar(s, c, "SELECT CONVERT(varchar(22), MIN(__$start_lsn), 1) FROM cdc.dbo_t_CT WHERE id > 50"));
    static const int TILES[] = {1, 2, 3, 7, 36, 37, 38, 200};
    char q[1400];
    for (size_t k = 0; k < sizeof TILES / sizeof TILES[0]; k++) {
        const char *ranges[][2] = {{lo, hi}, {mid, hi}, {hi, lo}};
        for (int r = 0; r < 3; r++) {
            snprintf(q, sizeof q,
                     "SELECT CONVERT(varchar(22), MAX(t.lsn), 1) AS bound, "
                     "CONVERT(varchar(22), sys.fn_cdc_increment_lsn(MAX(t.lsn)), 1) AS "
                     "next_start, COUNT_BIG(*) AS row_count FROM (SELECT c.__$start_lsn AS "
                     "lsn, NTILE(%d) OVER (ORDER BY c.__$start_lsn) AS tile FROM cdc.[%s_CT] "
                     "AS c WHERE c.__$start_lsn BETWEEN CONVERT(binary(10), '%s', 1) AND "
                     "CONVERT(binary(10), '%s', 1)) AS t GROUP BY t.tile ORDER BY t.tile",
                     TILES[k], "dbo_t", ranges[r][0], ranges[r][1]);
            int n = compare_paths(srv, s, c, q, a, b);
            if (r == 0) CHECK_EQ_INT(n, (TILES[k] < 111 ? TILES[k] : 111)); /* 111 rows: a tile per row at most */
            if (r == 2) CHECK_EQ_INT(n, 0);
        }
    }
    sim_session_close(s);
    sim_server_close(srv);
    test_rmdir(dir);
    free(a);
    free(b);
    free(c);
}

/* The change store (sim_store.h) answers with the same bytes on the wire
 * as SQLite's fast path and the general path: every type, NULLs (ROW and
 * NBCROW), non-ASCII text, (max) types, offsets, the resume clause, the
 * order without command id, the split-point query. */
TEST(sim_store_wire_bytes_match_both_paths) {
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    test_tmpdir(dir, sizeof dir);
    sim_server *srv = wire_open(dir, "E. South America Standard Time");
    CHECK(srv != NULL);
    if (!srv) return;
    sim_session *s = test_login(srv, "sa", "Sa_Passw0rd", NULL);
    run(s, c, "CREATE DATABASE lab; USE lab;"
              " CREATE TABLE dbo.[all] (id int NOT NULL PRIMARY KEY, b bit NULL, ti tinyint NULL, si smallint NULL,"
              " bi bigint NULL, r real NULL, f float NULL, d decimal(38,4) NULL, m money NULL, sm smallmoney NULL,"
              " dt date NULL, tm time(7) NULL, dtm datetime NULL, sdt smalldatetime NULL, d2 datetime2(7) NULL,"
              " dto datetimeoffset(3) NULL, ch char(4) NULL, vc varchar(20) NULL, nc nchar(3) NULL, nv nvarchar(max) NULL,"
              " bn binary(4) NULL, vb varbinary(8) NULL, g uniqueidentifier NULL, vm varchar(max) NULL, bm varbinary(max) NULL,"
              " n2 nvarchar(40) NULL, d0 decimal(5,0) NULL);"
              " EXEC sys.sp_cdc_enable_db;"
              " EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'all', @role_name = NULL");
    CHECK_EQ_INT(c->nerrors, 0);
    run(s, c, "INSERT INTO dbo.[all] VALUES (1, 1, 255, -32768, 9223372036854775807, 1.5, -2.25, 12345678901234567890.1234,"
              " 922337203685477.5807, -214748.3648, '2024-02-29', '23:59:59.1234567', '2024-01-15 10:30:00.997',"
              " '2024-01-15 10:30:00', '2024-07-15 10:30:00.1234567', '2024-03-01 10:00:00.123 +05:30', 'ab', 'café',"
              " N'東京', N'naïve Ωmega 😀', 0x01020304, 0x0A0B, '6F9619FF-8B86-D011-B42D-00C04FC964FF',"
              " REPLICATE('x', 9000), 0x00FF00FF, N'Zoë straße', -99999);"
              " INSERT INTO dbo.[all] (id) VALUES (2);"
              " INSERT INTO dbo.[all] (id, dto, d, n2) VALUES (5, '0001-01-01 00:00:00 -14:00', -0.0001, N'');"
              " BEGIN TRAN; UPDATE dbo.[all] SET vc = 'x', nv = NULL WHERE id = 1; INSERT INTO dbo.[all] (id, vc) VALUES (3, 'three');"
              " DELETE FROM dbo.[all] WHERE id = 2; COMMIT;"
              " UPDATE dbo.[all] SET id = 4 WHERE id = 3;"
              " EXEC sim.run_capture");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM cdc.dbo_all_CT"), "9");
    char lo[64], hi[64];
    wire_lsn_range(s, c, "dbo_all", lo, hi);
    static const char *NAMES[] = {"id", "b", "ti", "si", "bi", "r", "f", "d", "m", "sm", "dt", "tm", "dtm", "sdt",
                                  "d2", "dto", "ch", "vc", "nc", "nv", "bn", "vb", "g", "vm", "bm", "n2", "d0", "gone"};
    enum { NF = 28 };
    mcdc_field f[NF];
    bool present[NF];
    memset(f, 0, sizeof f);
    for (int k = 0; k < NF; k++) { f[k].name = (char *)NAMES[k]; f[k].type = MCDC_TYPE_UTF8; f[k].nullable = true; present[k] = true; }
    present[NF - 1] = false;
    f[NF - 1].type = MCDC_TYPE_INT32;
    mcdc_buf q = {0}, w = {0};
    mcdc_clock utc = {MCDC_CLOCK_UTC, "", 0}, zone = {MCDC_CLOCK_ZONE, "E. South America Standard Time", 0};
    int64_t stored = 0;
    for (int cmd = 0; cmd < 2; cmd++)
        for (int z = 0; z < 2; z++) {
            reader_sql(&q, f, present, NF, cmd != 0, z ? &zone : &utc, lo, hi, NULL);
            CHECK_EQ_INT(wire_compare3(srv, s, (const char *)q.data, &stored, &w), 3);
            CHECK_EQ_INT((int)stored, 1);
            CHECK(w.len > 9 * 20);
        }
    /* only some columns present (NBCROW vs ROW changes with the NULLs) */
    for (int k = 1; k < NF - 1; k += 2) present[k] = false;
    reader_sql(&q, f, present, NF, true, &utc, lo, hi, NULL);
    CHECK_EQ_INT(wire_compare3(srv, s, (const char *)q.data, &stored, NULL), 3);
    CHECK_EQ_INT((int)stored, 1);
    for (int k = 1; k < NF - 1; k++) present[k] = true;
    /* resume after each row in turn: with and without command id */
    for (int cmd = 0; cmd < 2; cmd++) {
        reader_sql(&q, f, present, NF, cmd != 0, &utc, lo, hi, NULL);
        run(s, c, (const char *)q.data);
        CHECK_EQ_INT(c->nrows, 9);
        int nr = c->nrows;
        char (*keys)[COLL_CELL] = calloc((size_t)nr, COLL_CELL);
        for (int r = 0; r < nr; r++) memcpy(keys[r], c->rows[r], COLL_CELL);
        for (int r = 0; r < nr; r++) {
            mcdc_row_key after;
            memset(&after, 0, sizeof after);
            char *b1 = strchr(keys[r], '|'), *b2 = b1 ? strchr(b1 + 1, '|') : NULL, *b3 = b2 ? strchr(b2 + 1, '|') : NULL;
            CHECK(b1 && b2 && b3);
            if (!b1 || !b2 || !b3) break;
            *b1 = *b2 = 0;
            mcdc_lsn_parse_cstr(&after.start_lsn, keys[r], NULL);
            mcdc_lsn_parse_cstr(&after.seqval, b1 + 1, NULL);
            after.operation = atoi(b2 + 1);
            after.command_id = cmd ? atoi(b3 + 1) : 0;
            reader_sql(&q, f, present, NF, cmd != 0, &utc, lo, hi, &after);
            CHECK_EQ_INT(wire_compare3(srv, s, (const char *)q.data, &stored, NULL), 3);
            CHECK_EQ_INT((int)stored, 1);
        }
        free(keys);
    }
    /* an empty range, a range of one transaction */
    reader_sql(&q, f, present, NF, true, &utc, hi, lo, NULL);
    CHECK_EQ_INT(wire_compare3(srv, s, (const char *)q.data, &stored, NULL), 3);
    reader_sql(&q, f, present, NF, true, &utc, hi, hi, NULL);
    CHECK_EQ_INT(wire_compare3(srv, s, (const char *)q.data, &stored, NULL), 3);
    /* the split-point query */
    for (int tiles = 1; tiles <= 12; tiles += 5) {
        char sq[1024];
        snprintf(sq, sizeof sq,
                 "SELECT CONVERT(varchar(22), MAX(t.lsn), 1) AS bound, CONVERT(varchar(22), sys.fn_cdc_increment_lsn(MAX(t.lsn)), 1)"
                 " AS next_start, COUNT_BIG(*) AS row_count FROM (SELECT c.__$start_lsn AS lsn, NTILE(%d) OVER (ORDER BY"
                 " c.__$start_lsn) AS tile FROM cdc.[dbo_all_CT] AS c WHERE c.__$start_lsn BETWEEN CONVERT(binary(10), '%s', 1)"
                 " AND CONVERT(binary(10), '%s', 1)) AS t GROUP BY t.tile ORDER BY t.tile",
                 tiles, lo, hi);
        CHECK_EQ_INT(wire_compare3(srv, s, sq, &stored, NULL), 3);
        CHECK_EQ_INT((int)stored, 1);
    }
    mcdc_buf_free(&q);
    mcdc_buf_free(&w);
    sim_session_close(s);
    sim_server_close(srv);
    test_rmdir(dir);
    free(c);
}
