/*
 * test_txn.c - the table of txn app ids (mcdc_txn.h): every kind formats
 * to the text existing lakes and the reference hold, and is told back from
 * it (and nothing else is).
 */
#include <string.h>

#include "mcdc_test.h"
#include "mcdc_txn.h"

#define S "0x0000002A000001F00003"

TEST(txn_app_ids_are_the_texts_on_disk) {
    static const struct {
        mcdc_txn_kind k;
        const char *base;
        int64_t gen;
        const char *arg, *want;
    } cases[] = {
        {MCDC_TXN_STREAM, "orders", 0, NULL, "orders"},
        {MCDC_TXN_STREAM, "orders", 3, NULL, "orders.g3"},
        {MCDC_TXN_STREAM_FACTS, "orders", 0, NULL, "orders#facts"},
        {MCDC_TXN_STREAM_FACTS, "orders", 12, NULL, "orders.g12#facts"},
        {MCDC_TXN_EVENTS, "orders", 0, NULL, "orders#events"},
        {MCDC_TXN_SNAPSHOTS, "orders", 0, NULL, "orders#snapshots"},
        {MCDC_TXN_SNAPOPEN, "orders", 0, S, "orders#snapopen." S},
        {MCDC_TXN_SNAPPLAN, "orders", 0, S, "orders#snapplan." S},
        {MCDC_TXN_SNAPCHUNKS, "orders", 0, S, "orders#snapchunks." S},
        {MCDC_TXN_SNAP, "orders", 0, S, "orders#snap." S},
        {MCDC_TXN_SNAPDONE, "orders", 0, S, "orders#snapdone." S},
        {MCDC_TXN_APPLY, NULL, 0, NULL, "mssql-cdc.apply"},
        {MCDC_TXN_REPAIR, "r1", 0, NULL, "mssql-cdc.repair.r1"},
        {MCDC_TXN_REPAIR_FACTS, "r1", 0, NULL, "mssql-cdc.repair.r1#facts"},
        {MCDC_TXN_RECONCILE, "r1", 0, NULL, "mssql-cdc.reconcile.r1"},
    };
    bool seen[MCDC_TXN_KIND_COUNT] = {false};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[MCDC_TXN_APP_ID_MAX];
        CHECK_EQ_INT(mcdc_txn_app_id(out, sizeof out, cases[i].k, cases[i].base, cases[i].gen,
                                     cases[i].arg, NULL),
                     MCDC_OK);
        CHECK_EQ_STR(out, cases[i].want);
        CHECK_EQ_INT(mcdc_txn_entry_of(cases[i].k)->kind, cases[i].k);
        int64_t gen = -1;
        const char *arg = NULL;
        size_t arg_len = 0;
        CHECK(mcdc_txn_match(out, strlen(out), cases[i].k, cases[i].base, &gen, &arg, &arg_len));
        CHECK_EQ_INT(gen, cases[i].gen);
        CHECK(cases[i].arg == NULL ? arg == NULL
                                   : arg_len == strlen(cases[i].arg) &&
                                         memcmp(arg, cases[i].arg, arg_len) == 0);
        seen[cases[i].k] = true;
    }
    for (int k = 0; k < MCDC_TXN_KIND_COUNT; k++) CHECK(seen[k]); /* every kind is tested */
    CHECK_EQ_STR(mcdc_txn_fixed(MCDC_TXN_APPLY), "mssql-cdc.apply");
}

TEST(txn_match_tells_kinds_and_bases_apart) {
    /* another stream's, another kind's, a malformed generation or LSN */
    CHECK(!mcdc_txn_match("ordersx", 7, MCDC_TXN_STREAM, "orders", NULL, NULL, NULL));
    CHECK(!mcdc_txn_match("orders#facts", 12, MCDC_TXN_STREAM, "orders", NULL, NULL, NULL));
    CHECK(!mcdc_txn_match("orders.g", 8, MCDC_TXN_STREAM, "orders", NULL, NULL, NULL));
    CHECK(!mcdc_txn_match("orders.g0", 9, MCDC_TXN_STREAM, "orders", NULL, NULL, NULL));
    CHECK(!mcdc_txn_match("orders.g3x", 10, MCDC_TXN_STREAM, "orders", NULL, NULL, NULL));
    CHECK(!mcdc_txn_match("orders.g3", 9, MCDC_TXN_EVENTS, "orders", NULL, NULL, NULL));
    CHECK(!mcdc_txn_match("orders#snap.0x12", 16, MCDC_TXN_SNAP, "orders", NULL, NULL, NULL));
    CHECK(!mcdc_txn_match("orders#snapchunks." S, strlen("orders#snapchunks." S), MCDC_TXN_SNAP,
                          "orders", NULL, NULL, NULL));
    CHECK(!mcdc_txn_match("mssql-cdc.repair.r1#facts", 25, MCDC_TXN_REPAIR, "r1", NULL, NULL,
                          NULL));
    CHECK(!mcdc_txn_match("mssql-cdc.apply2", 16, MCDC_TXN_APPLY, NULL, NULL, NULL, NULL));
    /* a text that is not NUL-terminated where it ends (a cell) */
    CHECK(mcdc_txn_match("orders.g2 and more", 9, MCDC_TXN_STREAM, "orders", NULL, NULL, NULL));
    /* too long for the buffer: an error, not a cut text */
    char small[8];
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_txn_app_id(small, sizeof small, MCDC_TXN_EVENTS, "orders", 0, NULL, &e),
                 MCDC_E_LIMIT);
    CHECK_EQ_STR(small, "");
}
