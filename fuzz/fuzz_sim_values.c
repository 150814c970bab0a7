/*
 * fuzz_sim_values.c - libFuzzer target over the simulator's parsers of
 * hierarchyid (text and binary), geography/geometry (WKT, WKB, SQL
 * Server's serialization), xml and sql_variant values (src/sim/sim_udt.c).
 * The first byte picks the parser; the rest is its input. What parses must
 * round-trip: a hierarchyid's text and binary, a WKT value's bytes, a
 * serialization's WKB, xml normalized again unchanged. Built and run by
 * scripts/fuzz.sh (corpus: fuzz/corpus/sim_values).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim_udt.h"
#include "tds_result.h"

static void same(const mcdc_buf *a, const mcdc_buf *b) {
    if (a->len != b->len || (a->len && memcmp(a->data, b->data, a->len) != 0)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int which = data[0] % 8;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    char msg[SIM_UDT_MSG];
    mcdc_buf a = {0}, b = {0}, c = {0};
    bool geog = (data[0] & 0x10) != 0;
    switch (which) {
    case 0: /* hierarchyid text -> binary -> text -> binary */
        if (sim_hid_from_text((const char *)p, n, &a, msg) == 0) {
            if (sim_hid_to_text(a.data, a.len, &b, msg) != 0) abort();
            if (sim_hid_from_text((const char *)b.data, b.len, &c, msg) != 0) abort();
            same(&a, &c);
            if (sim_hid_level(a.data, a.len) < 0) abort();
        }
        break;
    case 1: { /* hierarchyid binary */
        if (sim_hid_to_text(p, n, &a, msg) == 0) {
            if (sim_hid_from_text((const char *)a.data, a.len, &b, msg) != 0) abort();
            bool null;
            (void)sim_hid_ancestor(p, n, 1, &c, &null, msg);
            (void)sim_hid_is_descendant(p, n, b.data, b.len);
        }
        break;
    }
    case 2: case 3: /* WKT -> serialization -> WKT -> serialization -> WKT (the same
                     * text: -0 writes as 0); WKB keeps every bit */
        if (sim_geo_from_wkt((const char *)p, n, geog ? 4326 : 0, geog, &a, msg) == 0) {
            if (sim_geo_to_wkt(a.data, a.len, geog, &b, msg) != 0) abort();
            if (sim_geo_from_wkt((const char *)b.data, b.len, geog ? 4326 : 0, geog, &c, msg) != 0) abort();
            mcdc_buf t = {0};
            if (sim_geo_to_wkt(c.data, c.len, geog, &t, msg) != 0) abort();
            same(&b, &t);
            mcdc_buf_free(&t);
            if (sim_geo_to_wkb(a.data, a.len, geog, &b, msg) != 0) abort();
            if (sim_geo_from_wkb(b.data, b.len, geog ? 4326 : 0, geog, &c, msg) != 0) abort();
            same(&a, &c);
        }
        break;
    case 4: /* WKB */
        if (sim_geo_from_wkb(p, n, 0, geog, &a, msg) == 0 && sim_geo_check(a.data, a.len, geog, msg) != 0) abort();
        break;
    case 5: /* serialized bytes, as CAST(0x.. AS geometry) reads them */
        if (sim_geo_check(p, n, geog, msg) == 0) {
            (void)sim_geo_to_wkt(p, n, geog, &a, msg);
            (void)sim_geo_to_wkb(p, n, geog, &b, msg);
            double d;
            bool null;
            (void)sim_geo_coord(p, n, geog, 0, &d, &null, msg);
            int64_t np;
            (void)sim_geo_num_points(p, n, geog, &np, msg);
        }
        break;
    case 6: /* xml: normalizing twice changes nothing */
        if (sim_xml_normalize((const char *)p, n, &a, msg) == 0) {
            if (sim_xml_normalize((const char *)a.data, a.len, &b, msg) != 0) abort();
            same(&a, &b);
        }
        break;
    default: { /* sql_variant text: split, and compare (a total order needs cmp(x, x) == 0) */
        sim_type t;
        const char *v;
        size_t vn;
        (void)sim_variant_split((const char *)p, n, &t, &v, &vn);
        if (sim_variant_cmp((const char *)p, n, (const char *)p, n) != 0) abort();
        size_t h = n / 2;
        int x = sim_variant_cmp((const char *)p, h, (const char *)p + h, n - h);
        int y = sim_variant_cmp((const char *)p + h, n - h, (const char *)p, h);
        if ((x > 0) != (y < 0) || (x == 0) != (y == 0)) abort();
        /* and its TDS encoding (SSVARIANT), as a change store cell */
        sim_tds_cellenc ce;
        if (sim_tds_cellenc_init(&ce, NULL) == MCDC_OK) {
            sim_column col = {"v", {SIM_T_SQL_VARIANT, 0, 0, 0}, true};
            sim_tds_col_enc e;
            sim_tds_col_plan(&e, &col);
            sim_value sv = {.kind = SIM_V_TEXT, .p = p, .n = n};
            if (sim_tds_cellenc_put(&ce, &e, &sv, &a, NULL) == MCDC_OK) {
                /* LONG length, then as many bytes */
                if (a.len < 4) abort();
                uint32_t total = (uint32_t)a.data[0] | (uint32_t)a.data[1] << 8 | (uint32_t)a.data[2] << 16 |
                                 (uint32_t)a.data[3] << 24;
                if (total + 4 != a.len || total > 8016) abort();
            }
            sim_tds_cellenc_free(&ce);
        }
        break;
    }
    }
    mcdc_buf_free(&a);
    mcdc_buf_free(&b);
    mcdc_buf_free(&c);
    return 0;
}
