/* test_sim_point_read.c - the simulator answers repair's point reads
 * (src/source/mcdc_point_read.c) exactly: a composite key of a
 * case-insensitive nvarchar and an int, a thousand keys OR'ed as a balanced
 * tree of (a = CAST(...) AND b = n) terms (a chain of a thousand ORs nests
 * past SQLite's depth of 1000), one of them NULL (IS NULL), some absent. */
#include "test_sim_helpers.h"

#define NKEYS 1000

/* keys[lo..hi) as repair writes them */
static void or_tree(mcdc_buf *q, int lo, int hi) {
    if (hi - lo == 1) {
        if (lo == 0) {
            mcdc_buf_append_str(q, "([region] IS NULL AND [id] = 0)", NULL);
            return;
        }
        /* every other key is absent: id past the ones inserted */
        mcdc_buf_printf(q, NULL, "([region] = CAST(N'%s' AS nvarchar(12)) AND [id] = %d)",
                        lo % 2 ? "eu" : "US", lo % 2 ? lo : lo + 100000);
        return;
    }
    int mid = lo + (hi - lo) / 2;
    mcdc_buf_append_byte(q, '(', NULL);
    or_tree(q, lo, mid);
    mcdc_buf_append_str(q, " OR ", NULL);
    or_tree(q, mid, hi);
    mcdc_buf_append_byte(q, ')', NULL);
}

TEST(sim_point_reads_of_a_thousand_composite_keys) {
    char dir[64];
    test_tmpdir(dir, sizeof dir);
    sim_server *srv = test_server(dir, 0);
    sim_session *s = test_login(srv, "sa", "Sa_Passw0rd", NULL);
    coll *c = calloc(1, sizeof *c);
    run(s, c, "CREATE DATABASE pr; USE pr; CREATE TABLE dbo.t (region nvarchar(12) NULL, id int NOT NULL, v int NULL, "
              "CONSTRAINT pk UNIQUE (region, id))");
    run(s, c, "INSERT INTO dbo.t (region, id, v) SELECT r.x, n, n FROM (SELECT a.x + 10 * b.x + 100 * e.x AS n FROM "
              "(VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)) a(x) CROSS JOIN (VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),"
              "(9)) b(x) CROSS JOIN (VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)) e(x)) s CROSS JOIN (VALUES (N'EU'), "
              "(N'us')) r(x); INSERT INTO dbo.t (region, id, v) VALUES (NULL, 0, -1)");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT_BIG(*) FROM dbo.t"), "2001");
    mcdc_buf q = {0};
    mcdc_buf_append_str(&q, "SELECT COUNT_BIG(*), SUM(CAST(v AS decimal(38,0))) FROM [dbo].[t] AS t WHERE ", NULL);
    or_tree(&q, 0, NKEYS);
    mcdc_buf_cstr(&q, NULL);
    /* found: the NULL key (v -1) and the odd ids 1..999 in region EU (as eu) */
    long sum = -1;
    int n = 1;
    for (int k = 1; k < NKEYS; k += 2, n++) sum += k;
    char want[64];
    snprintf(want, sizeof want, "%d|%ld", n, sum);
    CHECK_EQ_STR(scalar(s, c, (const char *)q.data), want);
    CHECK_EQ_INT(c->nerrors, 0);
    mcdc_buf_free(&q);
    sim_session_close(s);
    sim_server_close(srv);
    test_rmdir(dir);
    free(c);
}
