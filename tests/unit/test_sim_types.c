/* test_sim_types.c - hierarchyid, geography/geometry, xml and sql_variant
 * in the simulator: their values (MS-SSCLRT layouts), conversions,
 * methods, comparisons and TDS encodings. */
#include "mcdc_cdc_client.h"
#include "sim_engine_int.h"
#include "sim_udt.h"
#include "tds_result.h"
#include "test_sim_helpers.h"
#include "test_sim_wire.h"

typedef struct tfx {
    char dir[64];
    sim_server *srv;
    sim_session *s;
    coll *c;
} tfx;

static void tfx_open(tfx *f) {
    test_tmpdir(f->dir, sizeof f->dir);
    f->srv = test_server(f->dir, 0);
    f->s = test_login(f->srv, "sa", "Sa_Passw0rd", NULL);
    f->c = calloc(1, sizeof *f->c);
    run(f->s, f->c, "CREATE DATABASE ty; USE ty");
}

static void tfx_close(tfx *f) {
    sim_session_close(f->s);
    sim_server_close(f->srv);
    test_rmdir(f->dir);
    free(f->c);
}

static const char *hexs(const mcdc_buf *b, char *out, size_t cap) {
    size_t o = 0;
    for (size_t k = 0; k < b->len && o + 3 < cap; k++) o += (size_t)snprintf(out + o, cap - o, "%02X", b->data[k]);
    out[o] = 0;
    return out;
}

/* hierarchyid: the binary SQL Server gives ('/1/' = 0x58, the method
 * reference's '/1/1/3/' = 0x5ADE), both ways, negative and dotted labels,
 * every label range, and bad input refused with SQL Server's text. */
TEST(sim_types_hierarchyid_binary) {
    mcdc_buf b = {0}, t = {0};
    char msg[SIM_UDT_MSG], hx[256];
    CHECK_EQ_INT(sim_hid_from_text("/", 1, &b, msg), 0);
    CHECK_EQ_INT(b.len, 0);
    CHECK_EQ_INT(sim_hid_from_text("/1/", 3, &b, msg), 0);
    CHECK_EQ_STR(hexs(&b, hx, sizeof hx), "58");
    CHECK_EQ_INT(sim_hid_from_text("/1/1/3/", 7, &b, msg), 0);
    CHECK_EQ_STR(hexs(&b, hx, sizeof hx), "5ADE");
    CHECK_EQ_INT(sim_hid_from_text("/1/1/", 5, &b, msg), 0);
    CHECK_EQ_STR(hexs(&b, hx, sizeof hx), "5AC0");
    CHECK_EQ_INT(sim_hid_from_text("/2/", 3, &b, msg), 0);
    CHECK_EQ_STR(hexs(&b, hx, sizeof hx), "68");
    CHECK_EQ_INT(sim_hid_from_text("/-1/", 4, &b, msg), 0);
    CHECK_EQ_STR(hexs(&b, hx, sizeof hx), "3F80");
    /* round trips over every pattern, dotted labels and both signs */
    static const char *const R[] = {"/0/", "/3/", "/4/", "/7/", "/8/", "/15/", "/16/", "/79/", "/80/", "/1103/",
                                    "/1104/", "/5199/", "/5200/", "/4294972495/", "/4294972496/", "/281479271683151/",
                                    "/-8/", "/-9/", "/-72/", "/-73/", "/-4168/", "/-4169/", "/-4294971464/",
                                    "/-4294971465/", "/-281479271682120/", "/1.2/", "/1.2.3/4/", "/-5.7/0.0/",
                                    "/1/2/3/4/5/6/7/8/9/10/"};
    for (size_t k = 0; k < sizeof R / sizeof R[0]; k++) {
        CHECK_EQ_INT(sim_hid_from_text(R[k], strlen(R[k]), &b, msg), 0);
        CHECK_EQ_INT(sim_hid_to_text(b.data, b.len, &t, msg), 0);
        mcdc_buf_cstr(&t, NULL);
        CHECK_EQ_STR((const char *)t.data, R[k]);
    }
    /* depth-first order is byte order */
    mcdc_buf c2 = {0};
    sim_hid_from_text("/1/", 3, &b, msg);
    sim_hid_from_text("/1/1/", 5, &c2, msg);
    CHECK(memcmp(b.data, c2.data, 1) <= 0 && b.len < c2.len);
    sim_hid_from_text("/1.1/", 5, &b, msg);
    sim_hid_from_text("/2/", 3, &c2, msg);
    CHECK(memcmp(b.data, c2.data, b.len < c2.len ? b.len : c2.len) < 0);
    CHECK_EQ_INT(sim_hid_level((const uint8_t *)"\x5A\xDE", 2), 3);
    bool null;
    CHECK_EQ_INT(sim_hid_ancestor((const uint8_t *)"\x5A\xDE", 2, 1, &b, &null, msg), 0);
    CHECK(!null && b.len == 2 && b.data[0] == 0x5A && b.data[1] == 0xC0);
    CHECK_EQ_INT(sim_hid_ancestor((const uint8_t *)"\x5A\xDE", 2, 4, &b, &null, msg), 0);
    CHECK(null);
    CHECK_EQ_INT(sim_hid_is_descendant((const uint8_t *)"\x5A\xDE", 2, (const uint8_t *)"\x58", 1), 1);
    CHECK_EQ_INT(sim_hid_is_descendant((const uint8_t *)"\x58", 1, (const uint8_t *)"\x5A\xDE", 2), 0);
    CHECK_EQ_INT(sim_hid_from_text("1/", 2, &b, msg), 6522);
    CHECK(strstr(msg, "24001") != NULL && strstr(msg, "'1/'") != NULL);
    CHECK_EQ_INT(sim_hid_from_text("/1//", 4, &b, msg), 6522);
    CHECK_EQ_INT(sim_hid_from_text("/a/", 3, &b, msg), 6522);
    CHECK_EQ_INT(sim_hid_to_text((const uint8_t *)"\xFF", 1, &t, msg), 6522);
    CHECK(strstr(msg, "24000") != NULL);
    CHECK_EQ_INT(sim_hid_level((const uint8_t *)"\x50", 1), -1); /* a label without its node's end */
    mcdc_buf_free(&b);
    mcdc_buf_free(&c2);
    mcdc_buf_free(&t);
}

static void le_f64(double d, char *out) { /* 16 hex digits, little-endian */
    uint64_t u;
    memcpy(&u, &d, 8);
    for (int k = 0; k < 8; k++) sprintf(out + 2 * k, "%02X", (unsigned)(u >> (8 * k)) & 0xFF);
}

/* geography/geometry: SQL Server's serialization (SRID, version 1,
 * properties, points; a geography point latitude first), WKT both ways,
 * WKB out and in, and the errors. */
TEST(sim_types_spatial_binary) {
    mcdc_buf b = {0}, t = {0};
    char msg[SIM_UDT_MSG], hx[1024], want[256], d1[17], d2[17];
    /* geography::Point(47.65, -122.35, 4326): E6100000 01 0C <lat> <long> */
    CHECK_EQ_INT(sim_geo_point(47.65, -122.35, 4326, true, &b, msg), 0);
    le_f64(47.65, d1);
    le_f64(-122.35, d2);
    snprintf(want, sizeof want, "E6100000010C%s%s", d1, d2);
    CHECK_EQ_STR(hexs(&b, hx, sizeof hx), want);
    /* the same point from WKT, which orders (long lat) */
    CHECK_EQ_INT(sim_geo_from_wkt("POINT (-122.35 47.65)", 21, 4326, true, &t, msg), 0);
    CHECK(t.len == b.len && memcmp(t.data, b.data, b.len) == 0);
    CHECK_EQ_INT(sim_geo_to_wkt(b.data, b.len, true, &t, msg), 0);
    mcdc_buf_cstr(&t, NULL);
    CHECK_EQ_STR((const char *)t.data, "POINT (-122.35 47.65)");
    /* WKB: byte order 1, type 1, x (longitude), y (latitude) */
    CHECK_EQ_INT(sim_geo_to_wkb(b.data, b.len, true, &t, msg), 0);
    snprintf(want, sizeof want, "0101000000%s%s", d2, d1);
    CHECK_EQ_STR(hexs(&t, hx, sizeof hx), want);
    mcdc_buf w2 = {0};
    CHECK_EQ_INT(sim_geo_from_wkb(t.data, t.len, 4326, true, &w2, msg), 0);
    CHECK(w2.len == b.len && memcmp(w2.data, b.data, b.len) == 0);
    int32_t srid = 0;
    CHECK(sim_geo_srid(b.data, b.len, &srid) && srid == 4326);
    double lat = 0;
    bool null = true;
    CHECK_EQ_INT(sim_geo_coord(b.data, b.len, true, 0, &lat, &null, msg), 0);
    CHECK(!null && lat == 47.65);
    /* a two-point line: the single-segment property (V|L = 0x14), no counts */
    CHECK_EQ_INT(sim_geo_from_wkt("LINESTRING (0 0, 1 2)", 21, 0, false, &b, msg), 0);
    le_f64(0, d1);
    le_f64(1, d2);
    char d3[17];
    le_f64(2, d3);
    snprintf(want, sizeof want, "000000000114%s%s%s%s", d1, d1, d2, d3);
    CHECK_EQ_STR(hexs(&b, hx, sizeof hx), want);
    /* a polygon: counts, figure 2 (exterior ring) at 0, shape -1/0/3 */
    CHECK_EQ_INT(sim_geo_from_wkt("POLYGON((0 0,1 0,1 1,0 0))", 26, 0, false, &b, msg), 0);
    CHECK_EQ_INT(b.len, 6 + 4 + 4 * 16 + 4 + 5 + 4 + 9);
    CHECK_EQ_INT(b.data[5], 0x04);
    CHECK_EQ_INT(b.data[6], 4);
    size_t fig = 6 + 4 + 64;
    CHECK(b.data[fig] == 1 && b.data[fig + 4] == 2 && b.data[fig + 5] == 0);
    size_t shp = fig + 4 + 5;
    CHECK(b.data[shp] == 1 && b.data[shp + 4] == 0xFF && b.data[shp + 8] == 0 && b.data[shp + 12] == 3);
    CHECK_EQ_INT(sim_geo_to_wkt(b.data, b.len, false, &t, msg), 0);
    mcdc_buf_cstr(&t, NULL);
    CHECK_EQ_STR((const char *)t.data, "POLYGON ((0 0, 1 0, 1 1, 0 0))");
    /* round trips of every shape */
    static const char *const W[] = {
        "POINT (1.5 -2.25)", "LINESTRING (1 2, 3 4, 5 6)", "POLYGON ((0 0, 4 0, 4 4, 0 0), (1 1, 2 1, 2 2, 1 1))",
        "MULTIPOINT ((1 2), (3 4))", "MULTILINESTRING ((1 1, 2 2), (3 3, 4 4))",
        "MULTIPOLYGON (((0 0, 1 0, 1 1, 0 0)), ((5 5, 6 5, 6 6, 5 5)))",
        "GEOMETRYCOLLECTION (POINT (1 2), LINESTRING (1 1, 2 2), GEOMETRYCOLLECTION (POINT (0 0)))",
        "POINT EMPTY", "LINESTRING EMPTY", "GEOMETRYCOLLECTION EMPTY", "POINT (0.1 1E+20)"};
    for (size_t k = 0; k < sizeof W / sizeof W[0]; k++) {
        CHECK_EQ_INT(sim_geo_from_wkt(W[k], strlen(W[k]), 0, false, &b, msg), 0);
        CHECK_EQ_INT(sim_geo_to_wkt(b.data, b.len, false, &t, msg), 0);
        mcdc_buf_cstr(&t, NULL);
        CHECK_EQ_STR((const char *)t.data, W[k]);
        CHECK_EQ_INT(sim_geo_check(b.data, b.len, false, msg), 0);
        CHECK_EQ_INT(sim_geo_to_wkb(b.data, b.len, false, &t, msg), 0);
        CHECK_EQ_INT(sim_geo_from_wkb(t.data, t.len, 0, false, &w2, msg), 0);
        CHECK(w2.len == b.len && memcmp(w2.data, b.data, b.len) == 0);
    }
    /* MULTIPOINT without inner parentheses reads the same */
    CHECK_EQ_INT(sim_geo_from_wkt("MULTIPOINT (1 2, 3 4)", 21, 0, false, &t, msg), 0);
    CHECK_EQ_INT(sim_geo_from_wkt("MULTIPOINT ((1 2), (3 4))", 25, 0, false, &b, msg), 0);
    CHECK(t.len == b.len && memcmp(t.data, b.data, b.len) == 0);
    /* POINT EMPTY: no points or figures, one shape with figure -1 */
    CHECK_EQ_INT(sim_geo_from_wkt("POINT EMPTY", 11, 4326, true, &b, msg), 0);
    CHECK_EQ_STR(hexs(&b, hx, sizeof hx), "E61000000104000000000000000001000000FFFFFFFFFFFFFFFF01");
    /* errors */
    CHECK_EQ_INT(sim_geo_from_wkt("POINT (1 2 3)", 13, 0, false, &b, msg), 6522);
    CHECK(strstr(msg, "Z and M") != NULL);
    CHECK_EQ_INT(sim_geo_from_wkt("CIRCLE (1 2)", 12, 0, false, &b, msg), 6522);
    CHECK(strstr(msg, "CIRCLE") != NULL);
    CHECK_EQ_INT(sim_geo_from_wkt("POINT (1 2", 10, 0, false, &b, msg), 6522);
    CHECK_EQ_INT(sim_geo_point(100, 0, 4326, true, &b, msg), 6522);
    CHECK(strstr(msg, "24201") != NULL);
    CHECK_EQ_INT(sim_geo_point(1, 0, 12, true, &b, msg), 6522);
    CHECK(strstr(msg, "24204") != NULL);
    CHECK_EQ_INT(sim_geo_check((const uint8_t *)"\xE6\x10\x00\x00\x01\x0C\x00", 7, true, msg), 6522);
    mcdc_buf_free(&b);
    mcdc_buf_free(&t);
    mcdc_buf_free(&w2);
}

/* xml as SQL Server serializes a stored value. */
TEST(sim_types_xml_normalized) {
    static const char *const X[][2] = {
        {"<a></a>", "<a />"},
        {"<a/>", "<a />"},
        {"<a  x='1'   y=\"2\" ><b/></a>", "<a x=\"1\" y=\"2\"><b /></a>"},
        {"<?xml version=\"1.0\" encoding=\"utf-8\"?><r>a &amp; b &lt; c &gt; d</r>", "<r>a &amp; b &lt; c &gt; d</r>"},
        {"<r>\n  <c>1</c>\n  <c>2</c>\n</r>", "<r><c>1</c><c>2</c></r>"},
        {"<r><![CDATA[x < y]]></r>", "<r>x &lt; y</r>"},
        {"<r a=\"&quot;q&apos;\">&#65;&#x42;</r>", "<r a=\"&quot;q'\">AB</r>"},
        {"<!-- c --><r/><?pi data?>", "<!-- c --><r /><?pi data?>"},
        {"text only", "text only"},
        {"<a/><b/>", "<a /><b />"},
    };
    mcdc_buf o = {0};
    char msg[SIM_UDT_MSG];
    for (size_t k = 0; k < sizeof X / sizeof X[0]; k++) {
        CHECK_EQ_INT(sim_xml_normalize(X[k][0], strlen(X[k][0]), &o, msg), 0);
        mcdc_buf_cstr(&o, NULL);
        CHECK_EQ_STR((const char *)o.data, X[k][1]);
    }
    CHECK_EQ_INT(sim_xml_normalize("<a><b></a>", 10, &o, msg), 9400);
    CHECK(strstr(msg, "end tag does not match start tag") != NULL && strstr(msg, "line 1") != NULL);
    CHECK_EQ_INT(sim_xml_normalize("<a>", 3, &o, msg), 9400);
    CHECK_EQ_INT(sim_xml_normalize("<a x=1/>", 8, &o, msg), 9400);
    CHECK_EQ_INT(sim_xml_normalize("<a>&bogus;</a>", 14, &o, msg), 9400);
    mcdc_buf_free(&o);
}

/* The types in tables: stored, read back with their methods and
 * conversions, ordered and compared where SQL Server allows. */
TEST(sim_types_in_tables) {
    tfx f;
    tfx_open(&f);
    coll *c = f.c;
    run(f.s, c, "CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, h hierarchyid NULL, g geography NULL, m geometry NULL,"
                " x xml NULL, v sql_variant NULL)");
    CHECK_EQ_INT(c->nerrors, 0);
    run(f.s, c, "INSERT INTO dbo.t (id, h, g, m, x, v) VALUES (1, '/1/1/', geography::Point(47.65, -122.35, 4326),"
                " geometry::STGeomFromText('LINESTRING (0 0, 1 1)', 0), '<a   x=''1''><b/></a>', CAST(42 AS int)),"
                " (2, hierarchyid::Parse('/1/'), 'POINT(1 2)', 'POINT (3 4)', N'<?xml version=\"1.0\"?><r>a &amp; b</r>',"
                " CAST(1.50 AS decimal(5,2))), (3, hierarchyid::GetRoot(), NULL, NULL, NULL, N'abc')");
    CHECK_EQ_INT(c->nerrors, 0);
    run(f.s, c, "SELECT id, h.ToString(), h.GetLevel(), g.STAsText(), g.STSrid, g.Lat, g.Long, m.STAsText(),"
                " CAST(x AS nvarchar(max)), SQL_VARIANT_PROPERTY(v, 'BaseType'), CAST(v AS nvarchar(20)) FROM dbo.t ORDER BY h");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_INT(c->nrows, 3);
    CHECK_EQ_STR(c->rows[0], "3|/|0|NULL|NULL|NULL|NULL|NULL|NULL|nvarchar|abc");
    CHECK_EQ_STR(c->rows[1], "2|/1/|1|POINT (1 2)|4326|2|1|POINT (3 4)|<r>a &amp; b</r>|decimal|1.50");
    CHECK_EQ_STR(c->rows[2], "1|/1/1/|2|POINT (-122.35 47.65)|4326|47.65|-122.35|LINESTRING (0 0, 1 1)|<a x=\"1\"><b /></a>|int|42");
    /* result types: the CLR types and xml keep theirs; methods type theirs */
    run(f.s, c, "SELECT h, g, m, x, v, h.ToString(), g.STAsBinary(), g.STSrid FROM dbo.t WHERE id = 1");
    CHECK_EQ_INT(c->cols[0].type.id, SIM_T_HIERARCHYID);
    CHECK_EQ_INT(c->cols[1].type.id, SIM_T_GEOGRAPHY);
    CHECK_EQ_INT(c->cols[2].type.id, SIM_T_GEOMETRY);
    CHECK_EQ_INT(c->cols[3].type.id, SIM_T_XML);
    CHECK_EQ_INT(c->cols[4].type.id, SIM_T_SQL_VARIANT);
    CHECK_EQ_INT(c->cols[5].type.id, SIM_T_NVARCHAR);
    CHECK_EQ_INT(c->cols[6].type.id, SIM_T_VARBINARY);
    CHECK_EQ_INT(c->cols[7].type.id, SIM_T_INT);
    CHECK(strncmp(c->rows[0], "0x5AC0|0xE6100000010C", 21) == 0);
    /* hierarchyid compares in depth-first order; descendants */
    run(f.s, c, "SELECT id FROM dbo.t WHERE h.IsDescendantOf(hierarchyid::Parse('/1/')) = 1 ORDER BY id");
    CHECK_EQ_INT(c->nrows, 2);
    CHECK_EQ_STR(scalar(f.s, c, "SELECT COUNT(*) FROM dbo.t WHERE h > hierarchyid::Parse('/1/')"), "1");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT CONVERT(nvarchar(4000), h) FROM dbo.t WHERE id = 1"), "/1/1/");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT h.GetAncestor(1).ToString() FROM dbo.t WHERE id = 1"), "/1/");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT CAST(h AS varbinary(16)) FROM dbo.t WHERE id = 1"), "0x5AC0");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT CAST(m AS nvarchar(100)) FROM dbo.t WHERE id = 2"), "POINT (3 4)");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT geometry::STGeomFromWKB(m.STAsBinary(), 7).STSrid FROM dbo.t WHERE id = 2"), "7");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT m.STX FROM dbo.t WHERE id = 2"), "3");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT m.STGeometryType() FROM dbo.t WHERE id = 1"), "LineString");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT CAST(CAST(0x5AC0 AS hierarchyid) AS nvarchar(20))"), "/1/1/");
    /* sql_variant: by family, then value (exact numeric above strings) */
    run(f.s, c, "SELECT id FROM dbo.t ORDER BY v");
    CHECK_EQ_INT(c->nrows, 3);
    CHECK_EQ_STR(c->rows[0], "3");
    CHECK_EQ_STR(c->rows[1], "2");
    CHECK_EQ_STR(c->rows[2], "1");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT id FROM dbo.t WHERE v = 42"), "1");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT SQL_VARIANT_PROPERTY(v, 'Precision') FROM dbo.t WHERE id = 2"), "5");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT SQL_VARIANT_PROPERTY(v, 'Scale') FROM dbo.t WHERE id = 2"), "2");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT CONVERT(int, v) + 1 FROM dbo.t WHERE id = 1"), "43");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT SQL_VARIANT_PROPERTY(CAST(SYSDATETIME() AS sql_variant), 'BaseType')"), "datetime2");
    /* bad values are refused as SQL Server refuses them */
    run(f.s, c, "INSERT INTO dbo.t (id, h) VALUES (9, 'not/a/path')");
    CHECK_EQ_INT(c->err_number, 6522);
    run(f.s, c, "INSERT INTO dbo.t (id, x) VALUES (9, '<a><b></a>')");
    CHECK_EQ_INT(c->err_number, 9400);
    run(f.s, c, "INSERT INTO dbo.t (id, g) VALUES (9, geography::Point(91, 0, 4326))");
    CHECK_EQ_INT(c->err_number, 6522);
    CHECK(strstr(c->err_text, "Latitude") != NULL);
    run(f.s, c, "SELECT t.x.ToString() FROM dbo.t");
    CHECK(c->nerrors > 0);
    tfx_close(&f);
}

/* Change tables of these types: the reader's change query gets the same
 * bytes from the change store, SQLite's fast path and the general path
 * (the store encodes the cells ahead). */
TEST(sim_types_change_rows_on_every_path) {
    char dir[64];
    test_tmpdir(dir, sizeof dir);
    sim_server *srv = wire_open(dir, "UTC");
    sim_session *s = test_login(srv, "sa", "Sa_Passw0rd", NULL);
    coll *c = calloc(1, sizeof *c);
    run(s, c, "CREATE DATABASE lab; USE lab; EXEC sys.sp_cdc_enable_db;"
              " CREATE TABLE dbo.[all] (id int NOT NULL PRIMARY KEY, h hierarchyid NULL, g geography NULL, m geometry NULL,"
              " x xml NULL, v sql_variant NULL, k AS (id * 2));"
              " EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'all', @role_name = NULL;"
              " EXEC sim.run_capture");
    CHECK_EQ_INT(c->nerrors, 0);
    run(s, c, "INSERT INTO dbo.[all] (id, h, g, m, x, v) VALUES (1, '/1/3/', geography::Point(-33.9, 18.4, 4326),"
              " 'POLYGON ((0 0, 2 0, 2 2, 0 0))', '<r><i n=\"1\"/></r>', CAST(7 AS smallint));"
              " INSERT INTO dbo.[all] (id, v) VALUES (2, N'two'); UPDATE dbo.[all] SET v = CAST(2.25 AS decimal(4,2)) WHERE id = 2;"
              " EXEC sim.run_capture");
    CHECK_EQ_INT(c->nerrors, 0);
    char lo[64], hi[64];
    wire_lsn_range(s, c, "dbo_all", lo, hi);
    static const char *NAMES[] = {"id", "h", "g", "m", "x", "v", "k"};
    enum { NF = 7 };
    mcdc_field f[NF];
    bool present[NF];
    memset(f, 0, sizeof f);
    for (int k = 0; k < NF; k++) { f[k].name = (char *)NAMES[k]; f[k].type = MCDC_TYPE_BINARY; f[k].nullable = true; present[k] = true; }
    mcdc_clock utc = {MCDC_CLOCK_UTC, "", 0};
    mcdc_buf q = {0}, w = {0};
    reader_sql(&q, f, present, NF, true, &utc, lo, hi, NULL);
    int64_t stored = 0;
    CHECK_EQ_INT(wire_compare3(srv, s, (const char *)q.data, &stored, &w), 3);
    CHECK_EQ_INT(stored, 1);
    /* the reply carries the UDT metadata, SSVARIANT and XMLTYPE */
    CHECK(memmem(w.data, w.len, "h\0i\0e\0r\0a\0r\0c\0h\0y\0i\0d\0", 22) != NULL);
    CHECK(memmem(w.data, w.len, "\xF1\x00", 2) != NULL);
    CHECK(memmem(w.data, w.len, "\x62\x50\x1F\x00\x00", 5) != NULL);
    /* the values, as the general path reads them */
    run(s, c, "SELECT h.ToString(), g.STAsText(), m.STAsText(), CAST(x AS nvarchar(max)), CAST(v AS nvarchar(10)), k"
              " FROM cdc.dbo_all_CT ORDER BY __$start_lsn, __$seqval, __$operation");
    CHECK_EQ_INT(c->nrows, 4);
    CHECK_EQ_STR(c->rows[0], "/1/3/|POINT (18.4 -33.9)|POLYGON ((0 0, 2 0, 2 2, 0 0))|<r><i n=\"1\" /></r>|7|NULL");
    CHECK_EQ_STR(c->rows[3], "NULL|NULL|NULL|NULL|2.25|NULL");
    mcdc_buf_free(&q);
    mcdc_buf_free(&w);
    sim_session_close(s);
    sim_server_close(srv);
    test_rmdir(dir);
    free(c);
}
