/*
 * test_cdc_probe.c - the shared probe's read of cdc.change_tables
 * (mcdc_cdc_probe_min_lsns, src/source/mcdc_cdc_client.c) on a scripted
 * connection: every item gets its instance's start_lsn whatever the order
 * of the items and of the server's rows, and the bounded read asks only
 * for the instances past the bound.
 */
#include <stdlib.h>

#include "mcdc_cdc_client.h"
#include "mcdc_changes.h" /* mcdc_probe_item */
#include "mcdc_test.h"
#include "test_driver_fake.h"

#define COLS "capture_instance:utf8,start_lsn:utf8"

static void item(mcdc_probe_item *it, const char *ci) {
    memset(it, 0, sizeof *it);
    snprintf(it->ci, sizeof it->ci, "%s", ci);
    it->has_min = true; /* cleared for every item the server does not list */
}

static const char *min_of(const mcdc_probe_item *it, char buf[MCDC_LSN_TEXT_LEN + 1]) {
    if (!it->has_min) return "-";
    mcdc_lsn_format(&it->min_lsn, buf);
    return buf;
}

/* The items out of their names' order (the runtime gives them sorted; any
 * other caller may not), two streams of one instance, one instance not
 * listed, and the server's rows in an order of their own with an instance
 * no item reads: each item gets its own instance's start_lsn, the unlisted
 * one none. */
TEST(cdc_probe_min_lsns_match_items_out_of_order) {
    fake_db *f = fake_new();
    mcdc_conn *conn = fake_connect(f);
    mcdc_cdc_client *c = NULL;
    mcdc_cdc_client_create(&c, conn, NULL);
    static const char *names[] = {"dbo_zeta", "dbo_alpha", "dbo_mid", "dbo_gone", "dbo_alpha",
                                  "dbo_beta", "dbo_a"};
    enum { N = sizeof names / sizeof *names };
    mcdc_probe_item it[N];
    for (int i = 0; i < N; i++) item(&it[i], names[i]);
    fake_reply(f, "cdc.change_tables", COLS,
               "dbo_mid|0x00000030000000100001\n"
               "dbo_other|0x00000031000000100001\n"
               "dbo_a|0x00000032000000100001\n"
               "dbo_zeta|0x00000033000000100001\n"
               "dbo_beta|0x00000034000000100001\n"
               "dbo_alpha|0x00000035000000100001");
    CHECK_EQ_INT(mcdc_cdc_probe_min_lsns(c, it, N, NULL, NULL), MCDC_OK);
    static const char *want[] = {"0x00000033000000100001", "0x00000035000000100001",
                                 "0x00000030000000100001", "-", "0x00000035000000100001",
                                 "0x00000034000000100001", "0x00000032000000100001"};
    char buf[MCDC_LSN_TEXT_LEN + 1];
    for (int i = 0; i < N; i++) {
        CHECK_EQ_STR(it[i].ci, names[i]); /* the items keep their order */
        CHECK_EQ_STR(min_of(&it[i], buf), want[i]);
    }
    /* no bound: every instance listed */
    CHECK_EQ_STR(fake_sql(f, 0), "SELECT t.capture_instance, CONVERT(varchar(22), t.start_lsn, 1) "
                                 "AS start_lsn FROM cdc.change_tables AS t");
    CHECK_EQ_INT(fake_unused_replies(f), 0);
    mcdc_cdc_client_free(c);
    mcdc_conn_close(conn);
    fake_free(f);
}

/* Bounded: only the instances whose start_lsn is past the bound are asked
 * for (an idle database's rows stay on the server); the items the server
 * does not list have none, whatever an earlier read gave them. */
TEST(cdc_probe_min_lsns_bounded_reads_only_past_the_bound) {
    fake_db *f = fake_new();
    mcdc_conn *conn = fake_connect(f);
    mcdc_cdc_client *c = NULL;
    mcdc_cdc_client_create(&c, conn, NULL);
    mcdc_probe_item it[3];
    item(&it[0], "dbo_b");
    item(&it[1], "dbo_a");
    item(&it[2], "dbo_c");
    fake_reply(f, "cdc.change_tables", COLS, "dbo_c|0x00000040000000100001");
    mcdc_lsn above;
    CHECK_EQ_INT(mcdc_lsn_parse_cstr(&above, "0x0000003F000000100001", NULL), MCDC_OK);
    CHECK_EQ_INT(mcdc_cdc_probe_min_lsns(c, it, 3, &above, NULL), MCDC_OK);
    char buf[MCDC_LSN_TEXT_LEN + 1];
    CHECK_EQ_STR(min_of(&it[0], buf), "-");
    CHECK_EQ_STR(min_of(&it[1], buf), "-");
    CHECK_EQ_STR(min_of(&it[2], buf), "0x00000040000000100001");
    CHECK_EQ_STR(fake_sql(f, 0), "SELECT t.capture_instance, CONVERT(varchar(22), t.start_lsn, 1) "
                                 "AS start_lsn FROM cdc.change_tables AS t WHERE t.start_lsn > "
                                 "CONVERT(binary(10), N'0x0000003F000000100001', 1)");
    /* a start_lsn that is not an LSN: a protocol error, not a guess */
    fake_reply(f, "cdc.change_tables", COLS, "dbo_a|0xZZ");
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_cdc_probe_min_lsns(c, it, 3, &above, &e), MCDC_E_PROTOCOL);
    CHECK(strstr(e.message, "min_lsn") != NULL);
    mcdc_cdc_client_free(c);
    mcdc_conn_close(conn);
    fake_free(f);
}
