#include <stdlib.h>

#include "mcdc_lsn.h"
#include "mcdc_test.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static mcdc_lsn random_lsn(void) {
    mcdc_lsn l;
    uint64_t a = rnd(), b = rnd();
    for (int i = 0; i < 8; i++) l.b[i] = (uint8_t)(a >> (8 * i));
    l.b[8] = (uint8_t)b;
    l.b[9] = (uint8_t)(b >> 8);
    /* Make small values and long runs of 00/FF likely too. */
    int mode = (int)(b >> 60);
    if (mode == 0) memset(l.b, 0, 8);
    if (mode == 1) memset(l.b + 4, 0xFF, 6);
    return l;
}

TEST(lsn_parse_accepts_the_forms_users_write) {
    mcdc_lsn l;
    char out[MCDC_LSN_TEXT_LEN + 1];
    CHECK_EQ_INT(mcdc_lsn_parse_cstr(&l, "0x0000002A000001F00003", NULL), MCDC_OK);
    mcdc_lsn_format(&l, out);
    CHECK_EQ_STR(out, "0x0000002A000001F00003");
    CHECK_EQ_INT(l.b[3], 0x2A);
    CHECK_EQ_INT(mcdc_lsn_parse_cstr(&l, "2a000001f00003", NULL), MCDC_OK);
    mcdc_lsn_format(&l, out);
    CHECK_EQ_STR(out, "0x0000002A000001F00003");
    CHECK_EQ_INT(mcdc_lsn_parse_cstr(&l, "0X1", NULL), MCDC_OK);
    mcdc_lsn_format(&l, out);
    CHECK_EQ_STR(out, "0x00000000000000000001");
    CHECK_EQ_INT(mcdc_lsn_parse_cstr(&l, "FFFFFFFFFFFFFFFFFFFF", NULL), MCDC_OK);
    mcdc_lsn_format(&l, out);
    CHECK_EQ_STR(out, "0xFFFFFFFFFFFFFFFFFFFF");
    /* Not NUL-terminated: only n bytes are read. */
    CHECK_EQ_INT(mcdc_lsn_parse(&l, "0x12zz", 4, NULL), MCDC_OK);
    mcdc_lsn_format(&l, out);
    CHECK_EQ_STR(out, "0x00000000000000000012");
}

TEST(lsn_parse_rejects_and_quotes_the_input) {
    mcdc_lsn l;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_lsn_parse_cstr(&l, "", &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "empty") != NULL);
    CHECK_EQ_INT(mcdc_lsn_parse_cstr(&l, "0x", &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "'0x'") != NULL);
    CHECK_EQ_INT(mcdc_lsn_parse_cstr(&l, "0x000000000000000000001", &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "'0x000000000000000000001'") != NULL);
    CHECK(strstr(e.message, "more than 20") != NULL);
    CHECK_EQ_INT(mcdc_lsn_parse_cstr(&l, "0x00G1", &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "'0x00G1'") != NULL);
    CHECK_EQ_INT(mcdc_lsn_parse_cstr(&l, " 0x01", &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_lsn_parse_cstr(&l, "0x01 ", &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_lsn_parse_cstr(&l, "-1", &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_lsn_parse_cstr(&l, "x01", &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_lsn_parse_cstr(&l, NULL, &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_lsn_parse(&l, "0x0\0" "1", 5, &e), MCDC_E_INVALID);
}

TEST(lsn_increment_decrement_and_their_limits) {
    mcdc_lsn l, r;
    char out[MCDC_LSN_TEXT_LEN + 1];
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_lsn_parse_cstr(&l, "0x000000FF00FFFFFFFFFF", NULL);
    CHECK_EQ_INT(mcdc_lsn_increment(&r, &l, &e), MCDC_OK);
    mcdc_lsn_format(&r, out);
    CHECK_EQ_STR(out, "0x000000FF010000000000");
    CHECK_EQ_INT(mcdc_lsn_decrement(&r, &r, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_lsn_cmp(&r, &l), 0);
    mcdc_lsn z = mcdc_lsn_zero();
    CHECK(mcdc_lsn_is_zero(&z));
    CHECK_EQ_INT(mcdc_lsn_decrement(&r, &z, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "zero LSN") != NULL);
    mcdc_lsn_parse_cstr(&l, "0xFFFFFFFFFFFFFFFFFFFF", NULL);
    r = z;
    CHECK_EQ_INT(mcdc_lsn_increment(&r, &l, &e), MCDC_E_INVALID);
    CHECK(mcdc_lsn_is_zero(&r)); /* out untouched on error */
    CHECK_EQ_INT(mcdc_lsn_increment(&r, &z, &e), MCDC_OK);
    mcdc_lsn_format(&r, out);
    CHECK_EQ_STR(out, "0x00000000000000000001");
}

TEST(lsn_integer_conversions) {
    mcdc_lsn l;
    uint64_t hi, lo;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_lsn_from_pair(&l, 0x1234, 0x0123456789ABCDEFull, &e), MCDC_OK);
    char out[MCDC_LSN_TEXT_LEN + 1];
    mcdc_lsn_format(&l, out);
    CHECK_EQ_STR(out, "0x12340123456789ABCDEF");
    mcdc_lsn_to_pair(&hi, &lo, &l);
    CHECK_EQ_INT(hi, 0x1234);
    CHECK(lo == 0x0123456789ABCDEFull);
    CHECK_EQ_INT(mcdc_lsn_from_pair(&l, 0x10000, 0, &e), MCDC_E_INVALID);
    mcdc_u128 big = (mcdc_u128)1 << 80;
    CHECK_EQ_INT(mcdc_lsn_from_u128(&l, big, &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_lsn_from_u128(&l, big - 1, &e), MCDC_OK);
    mcdc_lsn_format(&l, out);
    CHECK_EQ_STR(out, "0xFFFFFFFFFFFFFFFFFFFF");
}

/* Property loops: format/parse round trip, integer round trip, +1/-1
 * agreeing with integer arithmetic, and LSN order = string order. */
TEST(lsn_properties_over_random_values) {
    char ta[MCDC_LSN_TEXT_LEN + 1], tb[MCDC_LSN_TEXT_LEN + 1];
    int bad = 0;
    for (int i = 0; i < 20000; i++) {
        mcdc_lsn a = random_lsn(), b = random_lsn(), p, q;
        mcdc_lsn_format(&a, ta);
        mcdc_lsn_format(&b, tb);
        if (strlen(ta) != MCDC_LSN_TEXT_LEN) bad++;
        if (mcdc_lsn_parse_cstr(&p, ta, NULL) != MCDC_OK || mcdc_lsn_cmp(&p, &a) != 0) bad++;
        /* lowercase, no prefix */
        char low[MCDC_LSN_TEXT_LEN + 1];
        for (int k = 0; k <= MCDC_LSN_TEXT_LEN; k++)
            low[k] = (char)((ta[k] >= 'A' && ta[k] <= 'F') ? ta[k] + 32 : ta[k]);
        if (mcdc_lsn_parse_cstr(&p, low + 2, NULL) != MCDC_OK || mcdc_lsn_cmp(&p, &a) != 0)
            bad++;
        int c1 = mcdc_lsn_cmp(&a, &b), c2 = strcmp(ta, tb);
        if ((c1 < 0) != (c2 < 0) || (c1 == 0) != (c2 == 0)) bad++;
        mcdc_u128 v = mcdc_lsn_to_u128(&a);
        if (mcdc_lsn_from_u128(&p, v, NULL) != MCDC_OK || mcdc_lsn_cmp(&p, &a) != 0) bad++;
        if ((mcdc_lsn_to_u128(&a) < mcdc_lsn_to_u128(&b)) != (c1 < 0)) bad++;
        if (mcdc_lsn_increment(&p, &a, NULL) == MCDC_OK) {
            if (mcdc_lsn_to_u128(&p) != v + 1) bad++;
            if (mcdc_lsn_decrement(&q, &p, NULL) != MCDC_OK || mcdc_lsn_cmp(&q, &a) != 0) bad++;
            if (mcdc_lsn_cmp(&p, &a) <= 0) bad++;
        }
        uint64_t hi, lo;
        mcdc_lsn_to_pair(&hi, &lo, &a);
        if (mcdc_lsn_from_pair(&p, hi, lo, NULL) != MCDC_OK || mcdc_lsn_cmp(&p, &a) != 0) bad++;
    }
    CHECK_EQ_INT(bad, 0);
}
