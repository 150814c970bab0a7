/* test_ewkb.c - SQL Server's SRID and WKB into EWKB (mcdc_ewkb.h). */
#include <stdlib.h>
#include <string.h>

#include "mcdc_ewkb.h"
#include "mcdc_reader.h"
#include "mcdc_test.h"

/* Hex (spaces ignored) into out; its byte count. */
static size_t unhex(const char *h, uint8_t *out, size_t cap) {
    size_t n = 0;
    for (; *h; h++) {
        if (*h == ' ') continue;
        unsigned v;
        if (n >= cap || sscanf(h, "%2x", &v) != 1) return 0;
        out[n++] = (uint8_t)v;
        h++;
    }
    return n;
}

/* in (hex) rewritten equals want (hex); 0 when it did. */
static int rewrites(const char *in, const char *want) {
    uint8_t p[512], w[512];
    size_t n = unhex(in, p, sizeof p), nw = unhex(want, w, sizeof w);
    char why[MCDC_EWKB_WHY_BYTES];
    if (n == 0 || n != nw) return -2;
    if (mcdc_ewkb_from_srid_wkb(p, n, why) != 0) {
        fprintf(stderr, "  %s: %s\n", in, why);
        return -1;
    }
    return memcmp(p, w, n) == 0 ? 0 : 1;
}

/* The reason in's bytes are refused ("" when they are not). */
static const char *refusal(const char *in, char why[MCDC_EWKB_WHY_BYTES]) {
    uint8_t p[512];
    size_t n = unhex(in, p, sizeof p);
    why[0] = 0;
    mcdc_ewkb_from_srid_wkb(p, n, why);
    return why;
}

#define X1 "000000000000F03F" /* 1.0 little endian */
#define X2 "0000000000000040" /* 2.0 */
#define B1 "3FF0000000000000" /* 1.0 big endian */

TEST(ewkb_moves_the_srid_into_the_first_header) {
    /* POINT(1 2), SRID 4326: PostGIS's ST_AsEWKB of it */
    CHECK_EQ_INT(rewrites("000010E6 01 01000000" X1 X2, "01 01000020 E6100000" X1 X2), 0);
    /* big endian: the flag and the SRID in its byte order */
    CHECK_EQ_INT(rewrites("000010E6 00 00000001" B1 B1, "00 20000001 000010E6" B1 B1), 0);
    /* SRID 0 (a geometry's default) still says it has one */
    CHECK_EQ_INT(rewrites("00000000 01 01000000" X1 X2, "01 01000020 00000000" X1 X2), 0);
    /* LINESTRING(1 2, 2 1), SRID 3857 */
    CHECK_EQ_INT(rewrites("00000F11 01 02000000 02000000" X1 X2 X2 X1,
                          "01 02000020 110F0000 02000000" X1 X2 X2 X1),
                 0);
    /* POLYGON((1 1, 2 1, 2 2, 1 1)) */
    CHECK_EQ_INT(rewrites("000010E6 01 03000000 01000000 04000000" X1 X1 X2 X1 X2 X2 X1 X1,
                          "01 03000020 E6100000 01000000 04000000" X1 X1 X2 X1 X2 X2 X1 X1),
                 0);
    /* GEOMETRYCOLLECTION(POINT(1 2), LINESTRING EMPTY): nested headers as
     * they are, in their own byte orders */
    CHECK_EQ_INT(rewrites("000010E6 01 07000000 02000000 01 01000000" X1 X2
                          " 00 00000002 00000000",
                          "01 07000020 E6100000 02000000 01 01000000" X1 X2
                          " 00 00000002 00000000"),
                 0);
    /* ISO Z (1001) and ZM (3001): three and four ordinates, codes kept */
    CHECK_EQ_INT(rewrites("000010E6 01 E9030000" X1 X2 X1, "01 E9030020 E6100000" X1 X2 X1), 0);
    CHECK_EQ_INT(rewrites("000010E6 01 B90B0000" X1 X2 X1 X2,
                          "01 B90B0020 E6100000" X1 X2 X1 X2),
                 0);
    /* MULTIPOINT M (2004) of two points */
    CHECK_EQ_INT(rewrites("00000000 01 D4070000 02000000 01 D1070000" X1 X2 X1
                          " 01 D1070000" X2 X1 X2,
                          "01 D4070020 00000000 02000000 01 D1070000" X1 X2 X1
                          " 01 D1070000" X2 X1 X2),
                 0);
    /* curves: COMPOUNDCURVE(CIRCULARSTRING(1 1, 2 2, 1 2)) */
    CHECK_EQ_INT(rewrites("00000000 01 09000000 01000000 01 08000000 03000000" X1 X1 X2 X2 X1 X2,
                          "01 09000020 00000000 01000000 01 08000000 03000000" X1 X1 X2 X2 X1
                              X2),
                 0);
}

TEST(ewkb_refuses_what_sql_server_does_not_write) {
    char why[MCDC_EWKB_WHY_BYTES];
    CHECK(strstr(refusal("000010E6 01 0100", why), "no SRID and WKB header") != NULL);
    CHECK(strstr(refusal("000010E6 02 01000000" X1 X2, why), "byte order 2") != NULL);
    CHECK(strstr(refusal("000010E6 01 00000000", why), "geometry type 0") != NULL);
    CHECK(strstr(refusal("000010E6 01 0D000000", why), "geometry type 13") != NULL);
    CHECK(strstr(refusal("000010E6 01 A10F0000" X1 X2, why), "geometry type 4001") != NULL);
    /* an SRID or Z flag of its own is no ISO code */
    CHECK(strstr(refusal("000010E6 01 01000020 E6100000" X1 X2, why), "geometry type") != NULL);
    CHECK(strstr(refusal("000010E6 01 01000080" X1 X2 X1, why), "geometry type") != NULL);
    CHECK(strstr(refusal("000010E6 01 01000000" X1 X2 "00", why), "1 bytes after the geometry") !=
          NULL);
    CHECK(strstr(refusal("000010E6 01 01000000" X1, why), "a point cut short at byte 9") != NULL);
    CHECK(strstr(refusal("000010E6 01 02000000 E8030000" X1 X2, why),
                 "a count of 1000 that the 16 bytes left cannot hold") != NULL);
    CHECK(strstr(refusal("000010E6 01 02000000 0100", why), "a count cut short") != NULL);
    CHECK(strstr(refusal("000010E6 01 07000000 02000000 01 01000000" X1, why),
                 "a count of 2 that the 13 bytes left cannot hold") != NULL);
    CHECK(strstr(refusal("000010E6 01 07000000 01000000 01 01000000" X1, why),
                 "a point cut short at byte 18") != NULL);
    CHECK(strstr(refusal("000010E6 01 07000000 01000000 03 01000000" X1 X2, why),
                 "byte order 3 (0 or 1) at byte 13") != NULL);
    /* collections in collections, deeper than the limit */
    char deep[2048] = "00000000 01 07000000 01000000";
    for (int i = 0; i < MCDC_WKB_DEPTH_MAX + 1; i++) strcat(deep, " 01 07000000 01000000");
    strcat(deep, " 01 01000000" X1 X2);
    CHECK(strstr(refusal(deep, why), "nested deeper than 32") != NULL);
    /* at the limit they parse */
    char ok[2048] = "00000000 01 07000000 01000000";
    for (int i = 0; i < MCDC_WKB_DEPTH_MAX - 1; i++) strcat(ok, " 01 07000000 01000000");
    strcat(ok, " 01 01000000" X1 X2);
    CHECK_EQ_STR(refusal(ok, why), "");
}

TEST(ewkb_column_rewrites_every_value_and_names_a_bad_one) {
    mcdc_schema *s = NULL;
    CHECK_EQ_INT(mcdc_schema_create(&s, 2, NULL), MCDC_OK);
    mcdc_schema_set(s, 0, "id", MCDC_TYPE_INT32, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 1, "shape", MCDC_TYPE_BINARY, 0, 0, 0, true, NULL);
    mcdc_batch *b = NULL;
    CHECK_EQ_INT(mcdc_batch_create(&b, s, 4, NULL), MCDC_OK);
    uint8_t pt[64], want[64];
    size_t n = unhex("000010E6 01 01000000" X1 X2, pt, sizeof pt);
    unhex("01 01000020 E6100000" X1 X2, want, sizeof want);
    for (int i = 0; i < 3; i++) mcdc_col_append_int(&b->columns[0], i, NULL);
    mcdc_col_append_bytes(&b->columns[1], pt, (int64_t)n, NULL);
    mcdc_col_append_null(&b->columns[1], NULL);
    mcdc_col_append_bytes(&b->columns[1], pt, (int64_t)n, NULL);
    const uint8_t reads[] = {MCDC_READ_VALUE, MCDC_READ_SPATIAL};
    CHECK_EQ_INT(mcdc_reader_finish_reads(b, 0, reads, 2, NULL), MCDC_OK);
    const mcdc_column *c = &b->columns[1];
    CHECK(memcmp(c->data + c->offsets[0], want, n) == 0);
    CHECK(!mcdc_col_is_valid(c, 1));
    CHECK(memcmp(c->data + c->offsets[2], want, n) == 0);
    /* a second pass would read EWKB as SRID + WKB: refused, named */
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_reader_finish_reads(b, 0, reads, 2, &e), MCDC_E_PROTOCOL);
    CHECK(strstr(e.message, "column 'shape', row 0") != NULL);
    /* no reads: nothing to do */
    CHECK_EQ_INT(mcdc_reader_finish_reads(b, 0, NULL, 2, NULL), MCDC_OK);
    mcdc_batch_free(b);
    mcdc_schema_unref(s);
}
