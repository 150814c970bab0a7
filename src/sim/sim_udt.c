/*
 * sim_udt.c - hierarchyid, geography/geometry, xml and sql_variant values
 * (see sim_udt.h).
 *
 * The binary layouts follow MS-SSCLRT ("Microsoft SQL Server CLR Types
 * Serialization Formats", section 2.1): hierarchyid's label patterns and
 * the spatial serialization (SRID, version 1, the properties byte H/M/V/P/L,
 * point/figure/shape arrays). Checked against values SQL Server gives and
 * its documentation shows: '/1/' = 0x58, '/1/1/3/' = 0x5ADE (the ToString
 * example of the hierarchyid method reference), a geography point as
 * E6100000 01 0C <lat> <long>.
 */
#include "sim_udt.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_val.h"

#define UDT_ERR 6522 /* a .NET error in a CLR type's method: SQL Server's number */

static int fail(char msg[SIM_UDT_MSG], int number, const char *fmt, ...) MCDC_PRINTF(3, 4);
static int fail(char msg[SIM_UDT_MSG], int number, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, SIM_UDT_MSG, fmt, ap);
    va_end(ap);
    return number;
}

/* ---- hierarchyid ------------------------------------------------------------ */
/* The label patterns of MS-SSCLRT 2.1.1: 'x' carries the label (less the
 * range's minimum), '0'/'1' are fixed, the final T bit is 1 when the label
 * ends its node (a dotted label "1.2" has T = 0 after "1", which is then
 * encoded as one more than its value). */
typedef struct hid_pat {
    int64_t min, max;
    const char *bits;
} hid_pat;

static const hid_pat HID_POS[] = {
    {0, 3, "01xxT"},
    {4, 7, "100xxT"},
    {8, 15, "101xxxT"},
    {16, 79, "110xx0x1xxxT"},
    {80, 1103, "1110xxx0xxx0x1xxxT"},
    {1104, 5199, "11110xxxxx0xxx0x1xxxT"},
    {5200, 4294972495LL, "111110xxxxxxxxxxxxxxxxxxx0xxxxxx0xxx0x1xxxT"},
    {4294972496LL, 281479271683151LL, "111111xxxxxxxxxxxxxx0xxxxxxxxxxxxxxxxxxxxx0xxxxxx0xxx0x1xxxT"},
};
static const hid_pat HID_NEG[] = {
    {-8, -1, "00111xxxT"},
    {-72, -9, "0010xx0x1xxxT"},
    {-4168, -73, "000110xxxxx0xxx0x1xxxT"},
    {-4294971464LL, -4169, "000101xxxxxxxxxxxxxxxxxxx0xxxxxx0xxx0x1xxxT"},
    {-281479271682120LL, -4294971465LL, "000100xxxxxxxxxxxxxx0xxxxxxxxxxxxxxxxxxxxx0xxxxxx0xxx0x1xxxT"},
};
#define NPOS (int)(sizeof HID_POS / sizeof HID_POS[0])
#define NNEG (int)(sizeof HID_NEG / sizeof HID_NEG[0])
#define HID_LABELS_MAX (SIM_HID_BYTES_MAX * 8 / 5 + 1)

static const hid_pat *hid_pat_of(int64_t v) {
    const hid_pat *set = v >= 0 ? HID_POS : HID_NEG;
    int n = v >= 0 ? NPOS : NNEG;
    for (int k = 0; k < n; k++)
        if (v >= set[k].min && v <= set[k].max) return &set[k];
    return NULL;
}

typedef struct bitw {
    mcdc_buf *out;
    uint8_t cur;
    int nbits; /* bits in cur */
    size_t total;
} bitw;

static int bitw_put(bitw *w, int bit) {
    w->cur = (uint8_t)(w->cur << 1 | (bit & 1));
    w->total++;
    if (++w->nbits == 8) {
        int rc = mcdc_buf_append_byte(w->out, w->cur, NULL);
        w->cur = 0;
        w->nbits = 0;
        return rc;
    }
    return MCDC_OK;
}

static int bitw_flush(bitw *w) {
    if (w->nbits == 0) return MCDC_OK;
    uint8_t b = (uint8_t)(w->cur << (8 - w->nbits));
    w->nbits = 0;
    return mcdc_buf_append_byte(w->out, b, NULL);
}

/* Writes label v (last: it ends its node) with its pattern. */
static int hid_put_label(bitw *w, int64_t v, bool last) {
    int64_t enc = last ? v : v + 1;
    const hid_pat *p = hid_pat_of(enc);
    if (!p) return MCDC_E_LIMIT;
    uint64_t field = (uint64_t)(enc - p->min);
    size_t len = strlen(p->bits);
    int nx = 0;
    for (size_t k = 0; k < len; k++) nx += p->bits[k] == 'x';
    int rc = MCDC_OK;
    for (size_t k = 0; k < len && rc == MCDC_OK; k++) {
        char c = p->bits[k];
        if (c == 'x') rc = bitw_put(w, (int)((field >> --nx) & 1));
        else if (c == 'T') rc = bitw_put(w, last ? 1 : 0);
        else rc = bitw_put(w, c == '1');
    }
    return rc;
}

/* Decoded labels: value and whether it ends a node. */
typedef struct hid_labels {
    int64_t v[HID_LABELS_MAX];
    bool last[HID_LABELS_MAX];
    int n;
} hid_labels;

static int bit_at(const uint8_t *p, size_t i) { return (p[i / 8] >> (7 - i % 8)) & 1; }

/* Parses the binary form; false when it is no hierarchyid. */
static bool hid_decode(const uint8_t *p, size_t n, hid_labels *out) {
    out->n = 0;
    if (n > SIM_HID_BYTES_MAX) return false;
    size_t nbits = n * 8, i = 0;
    while (i < nbits) {
        size_t rem = nbits - i;
        if (rem < 8) { /* the padding: zero bits to the byte's end */
            bool zero = true;
            for (size_t k = i; k < nbits; k++) if (bit_at(p, k)) zero = false;
            if (zero) break;
        }
        bool neg = bit_at(p, i) == 0 && rem >= 2 && bit_at(p, i + 1) == 0;
        const hid_pat *set = neg ? HID_NEG : HID_POS;
        int np = neg ? NNEG : NPOS;
        const hid_pat *pat = NULL;
        for (int k = 0; k < np && !pat; k++) {
            const char *b = set[k].bits;
            size_t pl = strcspn(b, "x");
            if (pl > rem) continue;
            bool ok = true;
            for (size_t q = 0; q < pl && ok; q++) ok = bit_at(p, i + q) == (b[q] == '1');
            if (ok) pat = &set[k];
        }
        if (!pat) return false;
        size_t len = strlen(pat->bits);
        if (len > rem || out->n >= HID_LABELS_MAX) return false;
        uint64_t field = 0;
        int t = 0;
        for (size_t q = 0; q < len; q++) {
            int bit = bit_at(p, i + q);
            char c = pat->bits[q];
            if (c == 'x') field = field << 1 | (uint64_t)bit;
            else if (c == 'T') t = bit;
            else if (bit != (c == '1')) return false;
        }
        int64_t v = pat->min + (int64_t)field - (t ? 0 : 1);
        out->v[out->n] = v;
        out->last[out->n] = t != 0;
        out->n++;
        i += len;
    }
    return out->n == 0 || out->last[out->n - 1];
}

static int hid_encode(const hid_labels *l, int upto, mcdc_buf *out) {
    bitw w = {out, 0, 0, 0};
    int rc = MCDC_OK;
    for (int k = 0; k < upto && rc == MCDC_OK; k++) rc = hid_put_label(&w, l->v[k], l->last[k]);
    if (rc == MCDC_OK) rc = bitw_flush(&w);
    if (rc == MCDC_OK && out->len > SIM_HID_BYTES_MAX) rc = MCDC_E_LIMIT;
    return rc;
}

static int hid_bad_text(const char *s, size_t n, char msg[SIM_UDT_MSG]) {
    return fail(msg, UDT_ERR,
                "24001: SqlHierarchyId.Parse failed because the input string '%.*s' is not a valid string representation of a SqlHierarchyId node.",
                (int)(n > 100 ? 100 : n), s);
}

int sim_hid_from_text(const char *s, size_t n, mcdc_buf *out, char msg[SIM_UDT_MSG]) {
    hid_labels *l = mcdc_malloc(sizeof *l);
    if (!l) return fail(msg, 701, "There is insufficient system memory to run this query.");
    l->n = 0;
    size_t i = 0;
    while (i < n && isspace((unsigned char)s[i])) i++;
    size_t e = n;
    while (e > i && isspace((unsigned char)s[e - 1])) e--;
    int rc = 0;
    if (i >= e || s[i] != '/' || s[e - 1] != '/') rc = hid_bad_text(s, n, msg);
    i++;
    while (rc == 0 && i < e) {
        /* one node: label [. label]* / */
        for (;;) {
            bool neg = false;
            if (i < e && s[i] == '-') { neg = true; i++; }
            if (i >= e || !isdigit((unsigned char)s[i])) { rc = hid_bad_text(s, n, msg); break; }
            int64_t v = 0;
            while (i < e && isdigit((unsigned char)s[i])) {
                if (v > (INT64_MAX - 9) / 10) { rc = hid_bad_text(s, n, msg); break; }
                v = v * 10 + (s[i++] - '0');
            }
            if (rc) break;
            if (neg) v = -v;
            if (l->n >= HID_LABELS_MAX) { rc = hid_bad_text(s, n, msg); break; }
            l->v[l->n] = v;
            l->last[l->n] = false;
            l->n++;
            if (i < e && s[i] == '.') { i++; continue; }
            if (i < e && s[i] == '/') { l->last[l->n - 1] = true; i++; break; }
            rc = hid_bad_text(s, n, msg);
            break;
        }
    }
    if (rc == 0) {
        mcdc_buf_reset(out);
        int e2 = hid_encode(l, l->n, out);
        if (e2 == MCDC_E_LIMIT)
            rc = fail(msg, UDT_ERR, "24002: SqlHierarchyId.Parse failed because the input string '%.*s' holds a label out of range or the value exceeds %d bytes.",
                      (int)(n > 100 ? 100 : n), s, SIM_HID_BYTES_MAX);
        else if (e2 != MCDC_OK) rc = fail(msg, 701, "There is insufficient system memory to run this query.");
    }
    mcdc_free(l);
    return rc;
}

static int hid_bad_bytes(char msg[SIM_UDT_MSG]) {
    return fail(msg, UDT_ERR, "24000: SqlHierarchyId operation failed because HierarchyId object was constructed from an invalid binary string.");
}

int sim_hid_to_text(const uint8_t *p, size_t n, mcdc_buf *out, char msg[SIM_UDT_MSG]) {
    hid_labels *l = mcdc_malloc(sizeof *l);
    if (!l) return fail(msg, 701, "There is insufficient system memory to run this query.");
    int rc = 0;
    if (!hid_decode(p, n, l)) rc = hid_bad_bytes(msg);
    else {
        mcdc_buf_reset(out);
        mcdc_buf_append_byte(out, '/', NULL);
        for (int k = 0; k < l->n; k++)
            mcdc_buf_printf(out, NULL, "%lld%c", (long long)l->v[k], l->last[k] ? '/' : '.');
    }
    mcdc_free(l);
    return rc;
}

int sim_hid_level(const uint8_t *p, size_t n) {
    hid_labels *l = mcdc_malloc(sizeof *l);
    if (!l) return -1;
    int lv = -1;
    if (hid_decode(p, n, l)) {
        lv = 0;
        for (int k = 0; k < l->n; k++) lv += l->last[k];
    }
    mcdc_free(l);
    return lv;
}

int sim_hid_ancestor(const uint8_t *p, size_t n, int64_t k, mcdc_buf *out, bool *null, char msg[SIM_UDT_MSG]) {
    *null = false;
    if (k < 0) return fail(msg, UDT_ERR, "24011: SqlHierarchyId.GetAncestor failed because 'n' was negative.");
    hid_labels *l = mcdc_malloc(sizeof *l);
    if (!l) return fail(msg, 701, "There is insufficient system memory to run this query.");
    int rc = 0;
    if (!hid_decode(p, n, l)) rc = hid_bad_bytes(msg);
    else {
        int level = 0;
        for (int q = 0; q < l->n; q++) level += l->last[q];
        if (k > level) *null = true;
        else {
            int keep = level - (int)k, upto = 0;
            for (int nodes = 0; upto < l->n && nodes < keep; upto++) nodes += l->last[upto];
            mcdc_buf_reset(out);
            if (hid_encode(l, upto, out) != MCDC_OK) rc = fail(msg, 701, "There is insufficient system memory to run this query.");
        }
    }
    mcdc_free(l);
    return rc;
}

int sim_hid_is_descendant(const uint8_t *p, size_t n, const uint8_t *q, size_t qn) {
    hid_labels *a = mcdc_malloc(sizeof *a), *b = mcdc_malloc(sizeof *b);
    int r = -1;
    if (a && b && hid_decode(p, n, a) && hid_decode(q, qn, b)) {
        /* every node of the parent is the child's node at that place */
        r = b->n <= a->n;
        for (int k = 0; r && k < b->n; k++) r = a->v[k] == b->v[k] && a->last[k] == b->last[k];
        if (r && b->n > 0 && !b->last[b->n - 1]) r = 0;
    }
    mcdc_free(a);
    mcdc_free(b);
    return r;
}

/* ---- geography / geometry ------------------------------------------------------ */
enum { GT_POINT = 1, GT_LINESTRING, GT_POLYGON, GT_MULTIPOINT, GT_MULTILINESTRING, GT_MULTIPOLYGON, GT_COLLECTION };
/* figure attributes of version 1 */
enum { FA_INTERIOR = 0, FA_STROKE = 1, FA_EXTERIOR = 2 };
/* properties */
#define GP_Z 0x01
#define GP_M 0x02
#define GP_VALID 0x04
#define GP_POINT 0x08
#define GP_SEGMENT 0x10
#define GP_HEMISPHERE 0x20

static const char *const GT_NAMES[] = {"", "POINT", "LINESTRING", "POLYGON", "MULTIPOINT", "MULTILINESTRING",
                                       "MULTIPOLYGON", "GEOMETRYCOLLECTION"};
static const char *const GT_TYPE[] = {"", "Point", "LineString", "Polygon", "MultiPoint", "MultiLineString",
                                      "MultiPolygon", "GeometryCollection"};

typedef struct geo_fig { uint8_t attr; int32_t vtx; } geo_fig;
typedef struct geo_shape { int32_t parent, fig; uint8_t type; } geo_shape;

/* One value: points in serialization order (geography: latitude first). */
typedef struct geo {
    int32_t srid;
    bool geog;
    double *x, *y;
    int32_t npts, cpts;
    geo_fig *figs;
    int32_t nfigs, cfigs;
    geo_shape *shapes;
    int32_t nshapes, cshapes;
} geo;

static void geo_free(geo *g) {
    mcdc_free(g->x);
    mcdc_free(g->y);
    mcdc_free(g->figs);
    mcdc_free(g->shapes);
    memset(g, 0, sizeof *g);
}

#define GEO_ITEMS_MAX 100000000 /* points, figures, shapes of one value */

static bool grow(void **p, int32_t *cap, int32_t need, size_t elem) {
    if (need <= *cap) return true;
    if (need > GEO_ITEMS_MAX) return false;
    int32_t nc = *cap ? *cap : 8;
    while (nc < need) nc = nc > GEO_ITEMS_MAX / 2 ? GEO_ITEMS_MAX : nc * 2;
    void *q = mcdc_realloc(*p, (size_t)nc * elem);
    if (!q) return false;
    *p = q;
    *cap = nc;
    return true;
}

static bool geo_add_point(geo *g, double wx, double wy) {
    int32_t c = g->cpts;
    if (!grow((void **)&g->x, &c, g->npts + 1, sizeof(double))) return false;
    c = g->cpts;
    if (!grow((void **)&g->y, &c, g->npts + 1, sizeof(double))) return false;
    g->cpts = c;
    /* WKT/WKB order is (x y) = (longitude latitude) for geography */
    g->x[g->npts] = g->geog ? wy : wx;
    g->y[g->npts] = g->geog ? wx : wy;
    g->npts++;
    return true;
}

static bool geo_add_fig(geo *g, uint8_t attr) {
    if (!grow((void **)&g->figs, &g->cfigs, g->nfigs + 1, sizeof *g->figs)) return false;
    g->figs[g->nfigs++] = (geo_fig){attr, g->npts};
    return true;
}

static int32_t geo_add_shape(geo *g, int32_t parent, uint8_t type) {
    if (!grow((void **)&g->shapes, &g->cshapes, g->nshapes + 1, sizeof *g->shapes)) return -1;
    g->shapes[g->nshapes] = (geo_shape){parent, g->nfigs, type};
    return g->nshapes++;
}

/* The figures of shape s: [*a, *b). */
static void shape_figs(const geo *g, int32_t s, int32_t *a, int32_t *b) {
    *a = g->shapes[s].fig;
    *b = *a;
    if (*a < 0) return;
    *b = g->nfigs;
    for (int32_t k = s + 1; k < g->nshapes; k++)
        if (g->shapes[k].fig >= 0) { *b = g->shapes[k].fig; break; }
}

/* The points of figure f: [*a, *b). */
static void fig_pts(const geo *g, int32_t f, int32_t *a, int32_t *b) {
    *a = g->figs[f].vtx;
    *b = f + 1 < g->nfigs ? g->figs[f + 1].vtx : g->npts;
}

static int geo_bad(char msg[SIM_UDT_MSG], bool geog) {
    return fail(msg, UDT_ERR,
                "A .NET Framework error occurred during execution of user-defined routine or aggregate \"%s\": System.FormatException: 24200: The specified input does not represent a valid %s instance.",
                geog ? "geography" : "geometry", geog ? "geography" : "geometry");
}

static int srid_check(int64_t srid, bool geog, char msg[SIM_UDT_MSG]) {
    /* geography: the SRIDs of sys.spatial_reference_systems (EPSG 4120-4999)
     * and 104001 (the unit sphere); geometry: 0 to 999999 */
    bool ok = geog ? (srid >= 4120 && srid <= 4999) || srid == 104001 : srid >= 0 && srid <= 999999;
    if (ok) return 0;
    return fail(msg, UDT_ERR,
                "24204: The spatial reference identifier (SRID) is not valid. The specified SRID must match one of the supported SRIDs displayed in the sys.spatial_reference_systems catalog view.");
}

/* Valid-flag and single-point/segment properties of a parsed value. */
static uint8_t geo_props(const geo *g) {
    uint8_t p = GP_VALID;
    if (g->nshapes == 1 && g->shapes[0].type == GT_POINT && g->npts == 1) p |= GP_POINT;
    else if (g->nshapes == 1 && g->shapes[0].type == GT_LINESTRING && g->npts == 2 && g->nfigs == 1) p |= GP_SEGMENT;
    for (int32_t f = 0; f < g->nfigs; f++) { /* rings must close: else not valid */
        if (g->figs[f].attr == FA_STROKE) continue;
        int32_t a, b;
        fig_pts(g, f, &a, &b);
        if (b - a < 4 || g->x[a] != g->x[b - 1] || g->y[a] != g->y[b - 1]) p = (uint8_t)(p & ~GP_VALID);
    }
    return p;
}

static void put_i32(mcdc_buf *o, int32_t v) {
    uint8_t b[4];
    for (int k = 0; k < 4; k++) b[k] = (uint8_t)((uint32_t)v >> (8 * k));
    mcdc_buf_append(o, b, 4, NULL);
}
static void put_u32(mcdc_buf *o, uint32_t v) { put_i32(o, (int32_t)v); }
static void put_f64(mcdc_buf *o, double d) {
    uint64_t u;
    memcpy(&u, &d, 8);
    uint8_t b[8];
    for (int k = 0; k < 8; k++) b[k] = (uint8_t)(u >> (8 * k));
    mcdc_buf_append(o, b, 8, NULL);
}

static int geo_serialize(const geo *g, mcdc_buf *o, char msg[SIM_UDT_MSG]) {
    if (g->geog)
        for (int32_t k = 0; k < g->npts; k++)
            if (!(g->x[k] >= -90 && g->x[k] <= 90))
                return fail(msg, UDT_ERR, "24201: Latitude values must be between -90 and 90 degrees.");
    mcdc_buf_reset(o);
    uint8_t props = geo_props(g);
    put_i32(o, g->srid);
    mcdc_buf_append_byte(o, 1, NULL);
    mcdc_buf_append_byte(o, props, NULL);
    if (!(props & (GP_POINT | GP_SEGMENT))) put_i32(o, g->npts);
    for (int32_t k = 0; k < g->npts; k++) {
        put_f64(o, g->x[k]);
        put_f64(o, g->y[k]);
    }
    if (!(props & (GP_POINT | GP_SEGMENT))) {
        put_i32(o, g->nfigs);
        for (int32_t f = 0; f < g->nfigs; f++) {
            mcdc_buf_append_byte(o, g->figs[f].attr, NULL);
            put_i32(o, g->figs[f].vtx);
        }
        put_i32(o, g->nshapes);
        for (int32_t s = 0; s < g->nshapes; s++) {
            put_i32(o, g->shapes[s].parent);
            put_i32(o, g->shapes[s].fig);
            mcdc_buf_append_byte(o, g->shapes[s].type, NULL);
        }
    }
    return 0;
}

typedef struct rd { const uint8_t *p; size_t n, i; } rd;
static bool rd_u8(rd *r, uint8_t *v) { if (r->i + 1 > r->n) return false; *v = r->p[r->i++]; return true; }
static bool rd_u32le(rd *r, uint32_t *v) {
    if (r->i + 4 > r->n) return false;
    *v = (uint32_t)r->p[r->i] | (uint32_t)r->p[r->i + 1] << 8 | (uint32_t)r->p[r->i + 2] << 16 | (uint32_t)r->p[r->i + 3] << 24;
    r->i += 4;
    return true;
}
static bool rd_f64(rd *r, bool le, double *d) {
    if (r->i + 8 > r->n) return false;
    uint64_t u = 0;
    for (int k = 0; k < 8; k++) u |= (uint64_t)r->p[r->i + (le ? (size_t)k : 7 - (size_t)k)] << (8 * k);
    r->i += 8;
    memcpy(d, &u, 8);
    return true;
}

/* Parses SQL Server's serialization (version 1, or 2 without segments). */
static int geo_parse(const uint8_t *p, size_t n, bool geog, geo *g, char msg[SIM_UDT_MSG]) {
    memset(g, 0, sizeof *g);
    g->geog = geog;
    rd r = {p, n, 0};
    uint32_t srid, cnt;
    uint8_t ver, props;
    if (!rd_u32le(&r, &srid) || !rd_u8(&r, &ver) || !rd_u8(&r, &props) || ver < 1 || ver > 2 || (props & (GP_Z | GP_M)))
        return geo_bad(msg, geog);
    g->srid = (int32_t)srid;
    uint32_t np = props & GP_POINT ? 1 : props & GP_SEGMENT ? 2 : 0;
    if (!np && !rd_u32le(&r, &np)) return geo_bad(msg, geog);
    if (np > (r.n - r.i) / 16) return geo_bad(msg, geog);
    for (uint32_t k = 0; k < np; k++) {
        double a, b;
        if (!rd_f64(&r, true, &a) || !rd_f64(&r, true, &b)) return geo_bad(msg, geog);
        /* stored order already: undo the swap geo_add_point makes */
        if (!geo_add_point(g, geog ? b : a, geog ? a : b)) { geo_free(g); return geo_bad(msg, geog); }
    }
    if (props & (GP_POINT | GP_SEGMENT)) { /* one figure from point 0, one shape */
        if (geo_add_shape(g, -1, props & GP_POINT ? GT_POINT : GT_LINESTRING) < 0 || !geo_add_fig(g, FA_STROKE)) {
            geo_free(g);
            return geo_bad(msg, geog);
        }
        g->figs[0].vtx = 0;
        return r.i == r.n ? 0 : (geo_free(g), geo_bad(msg, geog));
    }
    if (!rd_u32le(&r, &cnt) || cnt > (r.n - r.i) / 5) { geo_free(g); return geo_bad(msg, geog); }
    for (uint32_t f = 0; f < cnt; f++) {
        uint8_t a;
        uint32_t v;
        if (!rd_u8(&r, &a) || !rd_u32le(&r, &v) || v > np || (f > 0 && (int32_t)v < g->figs[f - 1].vtx) ||
            !grow((void **)&g->figs, &g->cfigs, g->nfigs + 1, sizeof *g->figs)) {
            geo_free(g);
            return geo_bad(msg, geog);
        }
        g->figs[g->nfigs++] = (geo_fig){a, (int32_t)v};
    }
    if (!rd_u32le(&r, &cnt) || cnt == 0 || cnt > (r.n - r.i) / 9) { geo_free(g); return geo_bad(msg, geog); }
    for (uint32_t s = 0; s < cnt; s++) {
        uint32_t par, fig;
        uint8_t t;
        if (!rd_u32le(&r, &par) || !rd_u32le(&r, &fig) || !rd_u8(&r, &t) || t < GT_POINT || t > GT_COLLECTION ||
            ((int32_t)par >= (int32_t)s) || ((int32_t)par < -1) || ((int32_t)fig < -1) || (int32_t)fig > g->nfigs ||
            !grow((void **)&g->shapes, &g->cshapes, g->nshapes + 1, sizeof *g->shapes)) {
            geo_free(g);
            return geo_bad(msg, geog);
        }
        g->shapes[g->nshapes++] = (geo_shape){(int32_t)par, (int32_t)fig, t};
    }
    if (ver == 2 && r.i < r.n) { /* segments: arcs, which this simulator does not keep */
        geo_free(g);
        return fail(msg, UDT_ERR, "the simulator reads %s values without circular arcs only", geog ? "geography" : "geometry");
    }
    if (r.i != r.n || g->shapes[0].parent != -1) { geo_free(g); return geo_bad(msg, geog); }
    return 0;
}

/* ---- WKT in ---- */
typedef struct wkt { const char *s; size_t n, i; geo *g; bool bad; char why[96]; } wkt;

static void ws(wkt *w) { while (w->i < w->n && isspace((unsigned char)w->s[w->i])) w->i++; }
static bool wkt_ch(wkt *w, char c) {
    ws(w);
    if (w->i < w->n && w->s[w->i] == c) { w->i++; return true; }
    return false;
}
static bool wkt_word(wkt *w, char *buf, size_t cap) {
    ws(w);
    size_t k = 0;
    while (w->i < w->n && isalpha((unsigned char)w->s[w->i])) {
        if (k + 1 < cap) buf[k++] = (char)toupper((unsigned char)w->s[w->i]);
        w->i++;
    }
    buf[k] = 0;
    return k > 0;
}
static bool wkt_empty(wkt *w) {
    size_t save = w->i;
    char word[16];
    if (wkt_word(w, word, sizeof word) && strcmp(word, "EMPTY") == 0) return true;
    w->i = save;
    return false;
}
static bool wkt_num(wkt *w, double *d) {
    ws(w);
    if (w->i >= w->n) return false;
    char buf[64];
    size_t k = 0;
    while (w->i < w->n && k + 1 < sizeof buf && (isdigit((unsigned char)w->s[w->i]) || strchr("+-.eE", w->s[w->i]))) buf[k++] = w->s[w->i++];
    buf[k] = 0;
    if (!k) return false;
    char *e;
    *d = strtod(buf, &e);
    return *e == 0 && isfinite(*d);
}
/* "x y" (a third or fourth number: Z/M, which this simulator does not keep) */
static bool wkt_point(wkt *w) {
    double a, b, z;
    if (!wkt_num(w, &a) || !wkt_num(w, &b)) { snprintf(w->why, sizeof w->why, "expected a coordinate pair"); return false; }
    size_t save = w->i;
    if (wkt_num(w, &z)) {
        snprintf(w->why, sizeof w->why, "Z and M values are not supported by the simulator");
        return false;
    }
    w->i = save;
    if (!geo_add_point(w->g, a, b)) { snprintf(w->why, sizeof w->why, "too many points"); return false; }
    return true;
}
/* "(x y, x y ...)" as one figure. */
static bool wkt_path(wkt *w, uint8_t attr) {
    if (!wkt_ch(w, '(')) { snprintf(w->why, sizeof w->why, "expected '('"); return false; }
    if (!geo_add_fig(w->g, attr)) return false;
    do {
        if (!wkt_point(w)) return false;
    } while (wkt_ch(w, ','));
    if (!wkt_ch(w, ')')) { snprintf(w->why, sizeof w->why, "expected ')' or ','"); return false; }
    return true;
}
static bool wkt_polygon_body(wkt *w) {
    if (!wkt_ch(w, '(')) { snprintf(w->why, sizeof w->why, "expected '('"); return false; }
    bool first = true;
    do {
        if (!wkt_path(w, first ? FA_EXTERIOR : FA_INTERIOR)) return false;
        first = false;
    } while (wkt_ch(w, ','));
    if (!wkt_ch(w, ')')) { snprintf(w->why, sizeof w->why, "expected ')' or ','"); return false; }
    return true;
}

static bool wkt_tagged(wkt *w, int32_t parent, int depth);

/* The body of a typed shape already added as shape s (type t). */
static bool wkt_body(wkt *w, int32_t s, uint8_t t, int depth) {
    geo *g = w->g;
    if (wkt_empty(w)) { g->shapes[s].fig = -1; return true; }
    switch (t) {
    case GT_POINT:
        if (!wkt_ch(w, '(') || !geo_add_fig(g, FA_STROKE) || !wkt_point(w) || !wkt_ch(w, ')')) {
            if (!w->why[0]) snprintf(w->why, sizeof w->why, "expected '(x y)'");
            return false;
        }
        return true;
    case GT_LINESTRING: return wkt_path(w, FA_STROKE);
    case GT_POLYGON: return wkt_polygon_body(w);
    case GT_MULTIPOINT:
    case GT_MULTILINESTRING:
    case GT_MULTIPOLYGON: {
        uint8_t ct = t == GT_MULTIPOINT ? GT_POINT : t == GT_MULTILINESTRING ? GT_LINESTRING : GT_POLYGON;
        if (!wkt_ch(w, '(')) { snprintf(w->why, sizeof w->why, "expected '('"); return false; }
        do {
            int32_t c = geo_add_shape(g, s, ct);
            if (c < 0) return false;
            if (ct == GT_POINT) {
                /* MULTIPOINT ((1 2), (3 4)) or MULTIPOINT (1 2, 3 4) */
                ws(w);
                if (w->i < w->n && w->s[w->i] == '(') {
                    if (!wkt_body(w, c, GT_POINT, depth + 1)) return false;
                } else if (wkt_empty(w)) {
                    g->shapes[c].fig = -1;
                } else if (!geo_add_fig(g, FA_STROKE) || !wkt_point(w)) return false;
            } else if (!wkt_body(w, c, ct, depth + 1)) return false;
        } while (wkt_ch(w, ','));
        if (!wkt_ch(w, ')')) { snprintf(w->why, sizeof w->why, "expected ')' or ','"); return false; }
        return true;
    }
    default: /* GEOMETRYCOLLECTION */
        if (!wkt_ch(w, '(')) { snprintf(w->why, sizeof w->why, "expected '('"); return false; }
        do {
            if (!wkt_tagged(w, s, depth + 1)) return false;
        } while (wkt_ch(w, ','));
        if (!wkt_ch(w, ')')) { snprintf(w->why, sizeof w->why, "expected ')' or ','"); return false; }
        return true;
    }
}

static bool wkt_tagged(wkt *w, int32_t parent, int depth) {
    char word[32];
    if (depth > 64) { snprintf(w->why, sizeof w->why, "collections nested too deeply"); return false; }
    if (!wkt_word(w, word, sizeof word)) { snprintf(w->why, sizeof w->why, "expected a type label"); return false; }
    uint8_t t = 0;
    for (uint8_t k = GT_POINT; k <= GT_COLLECTION; k++)
        if (strcmp(word, GT_NAMES[k]) == 0) t = k;
    if (!t) {
        snprintf(w->why, sizeof w->why, "the label %.16s is not valid", word);
        return false;
    }
    int32_t s = geo_add_shape(w->g, parent, t);
    return s >= 0 && wkt_body(w, s, t, depth);
}

/* A value being built: empty, of kind geography and SRID srid (checked). */
static int geo_begin(geo *g, int64_t srid, bool geography, char msg[SIM_UDT_MSG]) {
    memset(g, 0, sizeof *g);
    g->geog = geography;
    g->srid = (int32_t)srid;
    return srid_check(srid, geography, msg);
}

int sim_geo_from_wkt(const char *s, size_t n, int64_t srid, bool geography, mcdc_buf *out, char msg[SIM_UDT_MSG]) {
    geo g;
    int rc = geo_begin(&g, srid, geography, msg);
    if (rc) return rc;
    wkt w = {s, n, 0, &g, false, ""};
    bool ok = wkt_tagged(&w, -1, 0);
    ws(&w);
    if (ok && w.i != w.n) { ok = false; snprintf(w.why, sizeof w.why, "text after the end of the value"); }
    if (!ok)
        rc = fail(msg, UDT_ERR,
                  "24114/24117: The well-known text (WKT) input is not valid at character %zu (%s). Valid labels are POINT, LINESTRING, POLYGON, MULTIPOINT, MULTILINESTRING, MULTIPOLYGON and GEOMETRYCOLLECTION.",
                  w.i + 1, w.why[0] ? w.why : "unexpected input");
    else rc = geo_serialize(&g, out, msg);
    geo_free(&g);
    return rc;
}

/* ---- WKB in ---- */
static bool wkb_shape(rd *r, geo *g, int32_t parent, int depth) {
    uint8_t order;
    uint32_t type, cnt;
    if (depth > 64 || !rd_u8(r, &order) || order > 1) return false;
    bool le = order == 1;
    if (!rd_u32le(r, &type)) return false;
    if (!le) type = __builtin_bswap32(type);
    if (type < GT_POINT || type > GT_COLLECTION) return false;
    int32_t s = geo_add_shape(g, parent, (uint8_t)type);
    if (s < 0) return false;
    if (type == GT_POINT) {
        double a, b;
        if (!rd_f64(r, le, &a) || !rd_f64(r, le, &b)) return false;
        if (isnan(a) && isnan(b)) { g->shapes[s].fig = -1; return true; } /* POINT EMPTY */
        return geo_add_fig(g, FA_STROKE) && geo_add_point(g, a, b);
    }
    if (!rd_u32le(r, &cnt)) return false;
    if (!le) cnt = __builtin_bswap32(cnt);
    if (cnt == 0) { g->shapes[s].fig = -1; return true; }
    if (cnt > r->n - r->i) return false;
    if (type == GT_LINESTRING || type == GT_POLYGON) {
        for (uint32_t k = 0; k < cnt; k++) {
            uint32_t np = 1;
            if (type == GT_POLYGON) {
                if (!rd_u32le(r, &np)) return false;
                if (!le) np = __builtin_bswap32(np);
                if (np > (r->n - r->i) / 16) return false;
            } else np = cnt;
            if (!geo_add_fig(g, type == GT_LINESTRING ? FA_STROKE : k == 0 ? FA_EXTERIOR : FA_INTERIOR)) return false;
            for (uint32_t q = 0; q < np; q++) {
                double a, b;
                if (!rd_f64(r, le, &a) || !rd_f64(r, le, &b) || !geo_add_point(g, a, b)) return false;
            }
            if (type == GT_LINESTRING) break;
        }
        return true;
    }
    for (uint32_t k = 0; k < cnt; k++)
        if (!wkb_shape(r, g, s, depth + 1)) return false;
    return true;
}

int sim_geo_from_wkb(const uint8_t *p, size_t n, int64_t srid, bool geography, mcdc_buf *out, char msg[SIM_UDT_MSG]) {
    geo g;
    int rc = geo_begin(&g, srid, geography, msg);
    if (rc) return rc;
    rd r = {p, n, 0};
    if (!wkb_shape(&r, &g, -1, 0) || r.i != r.n)
        rc = fail(msg, UDT_ERR, "24210: The well-known binary (WKB) input is not valid.");
    else rc = geo_serialize(&g, out, msg);
    geo_free(&g);
    return rc;
}

int sim_geo_point(double a, double b, int64_t srid, bool geography, mcdc_buf *out, char msg[SIM_UDT_MSG]) {
    geo g;
    int rc = geo_begin(&g, srid, geography, msg);
    if (rc) return rc;
    if (!isfinite(a) || !isfinite(b)) return geo_bad(msg, geography);
    /* geography::Point(lat, long): WKT order is (long lat) */
    bool ok = geo_add_shape(&g, -1, GT_POINT) >= 0 && geo_add_fig(&g, FA_STROKE) &&
              geo_add_point(&g, geography ? b : a, geography ? a : b);
    rc = ok ? geo_serialize(&g, out, msg) : fail(msg, 701, "There is insufficient system memory to run this query.");
    geo_free(&g);
    return rc;
}

int sim_geo_check(const uint8_t *p, size_t n, bool geography, char msg[SIM_UDT_MSG]) {
    geo g;
    int rc = geo_parse(p, n, geography, &g, msg);
    geo_free(&g);
    return rc;
}

bool sim_geo_srid(const uint8_t *p, size_t n, int32_t *srid) {
    if (n < 6) return false;
    *srid = (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
    return true;
}

/* ---- WKT and WKB out ---- */
/* A coordinate as .NET's round-trip format writes it: 15 significant digits
 * when they read back the same, else 17 ("E" exponents). */
static void put_num(mcdc_buf *o, double d) {
    char b[40];
    snprintf(b, sizeof b, "%.15g", d);
    if (strtod(b, NULL) != d) snprintf(b, sizeof b, "%.17g", d);
    for (char *c = b; *c; c++) if (*c == 'e') *c = 'E';
    if (strcmp(b, "-0") == 0) snprintf(b, sizeof b, "0");
    mcdc_buf_append_str(o, b, NULL);
}

static void wkt_pts(const geo *g, int32_t f, mcdc_buf *o) {
    int32_t a, b;
    fig_pts(g, f, &a, &b);
    mcdc_buf_append_byte(o, '(', NULL);
    for (int32_t k = a; k < b; k++) {
        if (k > a) mcdc_buf_append_str(o, ", ", NULL);
        /* WKT order: x y (geography: longitude latitude) */
        put_num(o, g->geog ? g->y[k] : g->x[k]);
        mcdc_buf_append_byte(o, ' ', NULL);
        put_num(o, g->geog ? g->x[k] : g->y[k]);
    }
    mcdc_buf_append_byte(o, ')', NULL);
}

static void wkt_shape(const geo *g, int32_t s, bool tagged, mcdc_buf *o) {
    uint8_t t = g->shapes[s].type;
    if (tagged) {
        mcdc_buf_append_str(o, GT_NAMES[t], NULL);
        mcdc_buf_append_byte(o, ' ', NULL);
    }
    int32_t fa, fb;
    shape_figs(g, s, &fa, &fb);
    bool coll = t >= GT_MULTIPOINT;
    bool empty = coll ? true : fa < 0 || fa == fb;
    if (coll)
        for (int32_t k = s + 1; k < g->nshapes; k++) if (g->shapes[k].parent == s) { empty = false; break; }
    if (empty) { mcdc_buf_append_str(o, "EMPTY", NULL); return; }
    if (t == GT_POINT || t == GT_LINESTRING) { wkt_pts(g, fa, o); return; }
    if (t == GT_POLYGON) {
        mcdc_buf_append_byte(o, '(', NULL);
        for (int32_t f = fa; f < fb; f++) {
            if (f > fa) mcdc_buf_append_str(o, ", ", NULL);
            wkt_pts(g, f, o);
        }
        mcdc_buf_append_byte(o, ')', NULL);
        return;
    }
    mcdc_buf_append_byte(o, '(', NULL);
    int nc = 0;
    for (int32_t k = s + 1; k < g->nshapes; k++) {
        if (g->shapes[k].parent != s) continue;
        if (nc++) mcdc_buf_append_str(o, ", ", NULL);
        wkt_shape(g, k, t == GT_COLLECTION, o);
    }
    mcdc_buf_append_byte(o, ')', NULL);
}

int sim_geo_to_wkt(const uint8_t *p, size_t n, bool geography, mcdc_buf *out, char msg[SIM_UDT_MSG]) {
    geo g;
    int rc = geo_parse(p, n, geography, &g, msg);
    if (rc) return rc;
    mcdc_buf_reset(out);
    wkt_shape(&g, 0, true, out);
    geo_free(&g);
    return 0;
}

static void wkb_xy(const geo *g, int32_t k, mcdc_buf *o) {
    put_f64(o, g->geog ? g->y[k] : g->x[k]);
    put_f64(o, g->geog ? g->x[k] : g->y[k]);
}

static void wkb_shape_out(const geo *g, int32_t s, mcdc_buf *o) {
    uint8_t t = g->shapes[s].type;
    mcdc_buf_append_byte(o, 1, NULL);
    put_u32(o, t);
    int32_t fa, fb;
    shape_figs(g, s, &fa, &fb);
    if (t == GT_POINT) {
        if (fa < 0 || fa == fb) { put_f64(o, NAN); put_f64(o, NAN); return; }
        int32_t a, b;
        fig_pts(g, fa, &a, &b);
        wkb_xy(g, a, o);
        return;
    }
    if (t == GT_LINESTRING) {
        if (fa < 0 || fa == fb) { put_u32(o, 0); return; }
        int32_t a, b;
        fig_pts(g, fa, &a, &b);
        put_u32(o, (uint32_t)(b - a));
        for (int32_t k = a; k < b; k++) wkb_xy(g, k, o);
        return;
    }
    if (t == GT_POLYGON) {
        put_u32(o, fa < 0 ? 0u : (uint32_t)(fb - fa));
        for (int32_t f = fa; fa >= 0 && f < fb; f++) {
            int32_t a, b;
            fig_pts(g, f, &a, &b);
            put_u32(o, (uint32_t)(b - a));
            for (int32_t k = a; k < b; k++) wkb_xy(g, k, o);
        }
        return;
    }
    uint32_t nc = 0;
    for (int32_t k = s + 1; k < g->nshapes; k++) nc += g->shapes[k].parent == s;
    put_u32(o, nc);
    for (int32_t k = s + 1; k < g->nshapes; k++)
        if (g->shapes[k].parent == s) wkb_shape_out(g, k, o);
}

int sim_geo_to_wkb(const uint8_t *p, size_t n, bool geography, mcdc_buf *out, char msg[SIM_UDT_MSG]) {
    geo g;
    int rc = geo_parse(p, n, geography, &g, msg);
    if (rc) return rc;
    mcdc_buf_reset(out);
    wkb_shape_out(&g, 0, out);
    geo_free(&g);
    return 0;
}

int sim_geo_coord(const uint8_t *p, size_t n, bool geography, int what, double *out, bool *null, char msg[SIM_UDT_MSG]) {
    geo g;
    int rc = geo_parse(p, n, geography, &g, msg);
    if (rc) return rc;
    *null = !(g.shapes[0].type == GT_POINT && g.npts == 1);
    /* stored order: geography (lat, long), geometry (x, y) */
    if (!*null) *out = geography ? (what == 0 ? g.x[0] : g.y[0]) : (what == 0 ? g.y[0] : g.x[0]);
    geo_free(&g);
    return 0;
}

int sim_geo_type_name(const uint8_t *p, size_t n, bool geography, char *out, size_t cap, char msg[SIM_UDT_MSG]) {
    geo g;
    int rc = geo_parse(p, n, geography, &g, msg);
    if (rc) return rc;
    snprintf(out, cap, "%s", GT_TYPE[g.shapes[0].type]);
    geo_free(&g);
    return 0;
}

int sim_geo_num_points(const uint8_t *p, size_t n, bool geography, int64_t *out, char msg[SIM_UDT_MSG]) {
    geo g;
    int rc = geo_parse(p, n, geography, &g, msg);
    if (rc) return rc;
    *out = g.npts;
    geo_free(&g);
    return 0;
}

/* ---- xml ---------------------------------------------------------------------------- */
typedef struct xp {
    const char *s;
    size_t n, i;
    mcdc_buf *o;
    char *msg;
    int rc;
    int depth;
} xp;

static int xml_fail(xp *x, const char *what) {
    if (x->rc) return x->rc;
    int line = 1, col = 1;
    for (size_t k = 0; k < x->i && k < x->n; k++) {
        if (x->s[k] == '\n') { line++; col = 1; } else col++;
    }
    x->rc = fail(x->msg, 9400, "XML parsing: line %d, character %d, %s", line, col, what);
    return x->rc;
}

static bool xml_name_start(unsigned char c) { return isalpha(c) || c == '_' || c == ':' || c >= 0x80; }
static bool xml_name_char(unsigned char c) { return xml_name_start(c) || isdigit(c) || c == '-' || c == '.'; }

static bool xml_name(xp *x, const char **p, size_t *len) {
    if (x->i >= x->n || !xml_name_start((unsigned char)x->s[x->i])) return false;
    *p = x->s + x->i;
    while (x->i < x->n && xml_name_char((unsigned char)x->s[x->i])) x->i++;
    *len = (size_t)(x->s + x->i - *p);
    return true;
}

static void xml_ws(xp *x) { while (x->i < x->n && isspace((unsigned char)x->s[x->i])) x->i++; }

static bool xml_starts(const xp *x, const char *lit) {
    size_t l = strlen(lit);
    return x->i + l <= x->n && memcmp(x->s + x->i, lit, l) == 0;
}

static void put_utf8(mcdc_buf *o, uint32_t cp) {
    uint8_t b[4];
    size_t n;
    if (cp < 0x80) { b[0] = (uint8_t)cp; n = 1; }
    else if (cp < 0x800) { b[0] = (uint8_t)(0xC0 | cp >> 6); b[1] = (uint8_t)(0x80 | (cp & 63)); n = 2; }
    else if (cp < 0x10000) { b[0] = (uint8_t)(0xE0 | cp >> 12); b[1] = (uint8_t)(0x80 | (cp >> 6 & 63)); b[2] = (uint8_t)(0x80 | (cp & 63)); n = 3; }
    else { b[0] = (uint8_t)(0xF0 | cp >> 18); b[1] = (uint8_t)(0x80 | (cp >> 12 & 63)); b[2] = (uint8_t)(0x80 | (cp >> 6 & 63)); b[3] = (uint8_t)(0x80 | (cp & 63)); n = 4; }
    mcdc_buf_append(o, b, n, NULL);
}

/* Escapes one character of text (attr: in an attribute value). */
static void xml_put_char(mcdc_buf *o, uint32_t c, bool attr) {
    if (c == '&') mcdc_buf_append_str(o, "&amp;", NULL);
    else if (c == '<') mcdc_buf_append_str(o, "&lt;", NULL);
    else if (c == '>' && !attr) mcdc_buf_append_str(o, "&gt;", NULL);
    else if (c == '"' && attr) mcdc_buf_append_str(o, "&quot;", NULL);
    else if (c == '\r') mcdc_buf_append_str(o, "&#xD;", NULL);
    else put_utf8(o, c);
}

/* Reads character data up to stop ('<' in content, the quote in an
 * attribute), entities resolved, into a scratch buffer (UTF-8). */
static bool xml_chars(xp *x, char stop, mcdc_buf *into) {
    while (x->i < x->n && x->s[x->i] != stop) {
        char c = x->s[x->i];
        if (stop != '<' && c == '<') { xml_fail(x, "'<' in an attribute value"); return false; }
        if (c == '&') {
            size_t semi = x->i + 1;
            while (semi < x->n && semi - x->i < 12 && x->s[semi] != ';') semi++;
            if (semi >= x->n || x->s[semi] != ';') { xml_fail(x, "well formed check: an entity reference is not terminated"); return false; }
            const char *e = x->s + x->i + 1;
            size_t el = semi - x->i - 1;
            uint32_t cp = 0;
            if (el == 2 && memcmp(e, "lt", 2) == 0) cp = '<';
            else if (el == 2 && memcmp(e, "gt", 2) == 0) cp = '>';
            else if (el == 3 && memcmp(e, "amp", 3) == 0) cp = '&';
            else if (el == 4 && memcmp(e, "apos", 4) == 0) cp = '\'';
            else if (el == 4 && memcmp(e, "quot", 4) == 0) cp = '"';
            else if (el >= 2 && e[0] == '#') {
                char *end;
                unsigned long v = e[1] == 'x' ? strtoul(e + 2, &end, 16) : strtoul(e + 1, &end, 10);
                /* XML 1.0's Char: tab, line ends, 0x20.. without surrogates, FFFE, FFFF */
                bool bad = end != e + el || v > 0x10FFFF || (v < 0x20 && v != 9 && v != 10 && v != 13) ||
                           (v >= 0xD800 && v <= 0xDFFF) || v == 0xFFFE || v == 0xFFFF;
                if (bad) { xml_fail(x, "illegal xml character"); return false; }
                cp = (uint32_t)v;
            } else { xml_fail(x, "well formed check: undeclared entity"); return false; }
            put_utf8(into, cp);
            x->i = semi + 1;
            continue;
        }
        if (c == '\r') { /* line ends as an XML processor normalizes them */
            x->i++;
            if (x->i < x->n && x->s[x->i] == '\n') x->i++;
            mcdc_buf_append_byte(into, '\n', NULL);
            continue;
        }
        mcdc_buf_append_byte(into, (uint8_t)c, NULL);
        x->i++;
    }
    return true;
}

static void xml_put_text(mcdc_buf *o, const uint8_t *p, size_t n, bool attr) {
    for (size_t k = 0; k < n; k++) {
        uint8_t c = p[k];
        if (c == '&' || c == '<' || c == '>' || c == '"' || c == '\r') xml_put_char(o, c, attr);
        else mcdc_buf_append_byte(o, c, NULL);
    }
}

static bool xml_content(xp *x, const char *close, size_t close_len);

/* An element at '<' (not '</'). */
static bool xml_element(xp *x) {
    if (++x->depth > 128) { xml_fail(x, "the document is nested too deeply"); return false; }
    x->i++;
    const char *nm;
    size_t nl;
    if (!xml_name(x, &nm, &nl)) { xml_fail(x, "illegal qualified name character"); return false; }
    mcdc_buf_append_byte(x->o, '<', NULL);
    mcdc_buf_append(x->o, nm, nl, NULL);
    mcdc_buf scratch = {0};
    for (;;) {
        size_t before = x->i;
        xml_ws(x);
        if (x->i >= x->n) { mcdc_buf_free(&scratch); xml_fail(x, "unexpected end of input"); return false; }
        if (xml_starts(x, "/>")) {
            x->i += 2;
            mcdc_buf_append_str(x->o, " />", NULL);
            mcdc_buf_free(&scratch);
            x->depth--;
            return true;
        }
        if (x->s[x->i] == '>') { x->i++; break; }
        const char *an;
        size_t al;
        if (x->i == before || !xml_name(x, &an, &al)) { mcdc_buf_free(&scratch); xml_fail(x, "illegal qualified name character"); return false; }
        xml_ws(x);
        if (x->i >= x->n || x->s[x->i] != '=') { mcdc_buf_free(&scratch); xml_fail(x, "expected '='"); return false; }
        x->i++;
        xml_ws(x);
        if (x->i >= x->n || (x->s[x->i] != '"' && x->s[x->i] != '\'')) { mcdc_buf_free(&scratch); xml_fail(x, "A string literal was expected"); return false; }
        char q = x->s[x->i++];
        mcdc_buf_reset(&scratch);
        if (!xml_chars(x, q, &scratch)) { mcdc_buf_free(&scratch); return false; }
        if (x->i >= x->n) { mcdc_buf_free(&scratch); xml_fail(x, "unexpected end of input"); return false; }
        x->i++;
        mcdc_buf_append_byte(x->o, ' ', NULL);
        mcdc_buf_append(x->o, an, al, NULL);
        mcdc_buf_append_str(x->o, "=\"", NULL);
        xml_put_text(x->o, scratch.data, scratch.len, true);
        mcdc_buf_append_byte(x->o, '"', NULL);
    }
    mcdc_buf_free(&scratch);
    /* content, then </name>: an element without content is written "<a />" */
    size_t mark = x->o->len;
    mcdc_buf_append_byte(x->o, '>', NULL);
    if (!xml_content(x, nm, nl)) return false;
    if (x->o->len == mark + 1) {
        x->o->len = mark;
        mcdc_buf_append_str(x->o, " />", NULL);
    } else {
        mcdc_buf_append_str(x->o, "</", NULL);
        mcdc_buf_append(x->o, nm, nl, NULL);
        mcdc_buf_append_byte(x->o, '>', NULL);
    }
    x->depth--;
    return true;
}

/* Content up to "</close>" (close NULL: the document's end). */
static bool xml_content(xp *x, const char *close, size_t close_len) {
    mcdc_buf text = {0};
    bool ok = true;
    while (ok) {
        if (x->i >= x->n) {
            if (close) ok = xml_fail(x, "unexpected end of input") == 0;
            break;
        }
        if (x->s[x->i] != '<') {
            mcdc_buf_reset(&text);
            ok = xml_chars(x, '<', &text);
            if (!ok) break;
            bool blank = true;
            for (size_t k = 0; k < text.len && blank; k++) blank = isspace(text.data[k]) != 0;
            if (!blank) xml_put_text(x->o, text.data, text.len, false);
            continue;
        }
        if (xml_starts(x, "</")) {
            if (!close) { ok = xml_fail(x, "end tag does not match start tag") == 0; break; }
            x->i += 2;
            const char *nm;
            size_t nl;
            if (!xml_name(x, &nm, &nl) || nl != close_len || memcmp(nm, close, nl) != 0) {
                ok = xml_fail(x, "end tag does not match start tag") == 0;
                break;
            }
            xml_ws(x);
            if (x->i >= x->n || x->s[x->i] != '>') { ok = xml_fail(x, "expected '>'") == 0; break; }
            x->i++;
            break;
        }
        if (xml_starts(x, "<!--")) {
            const char *e = NULL;
            for (size_t k = x->i + 4; k + 2 < x->n; k++) if (memcmp(x->s + k, "-->", 3) == 0) { e = x->s + k; break; }
            if (!e) { ok = xml_fail(x, "unexpected end of input") == 0; break; }
            mcdc_buf_append(x->o, x->s + x->i, (size_t)(e + 3 - (x->s + x->i)), NULL);
            x->i = (size_t)(e + 3 - x->s);
            continue;
        }
        if (xml_starts(x, "<![CDATA[")) {
            const char *e = NULL;
            for (size_t k = x->i + 9; k + 2 < x->n; k++) if (memcmp(x->s + k, "]]>", 3) == 0) { e = x->s + k; break; }
            if (!e) { ok = xml_fail(x, "unexpected end of input") == 0; break; }
            xml_put_text(x->o, (const uint8_t *)x->s + x->i + 9, (size_t)(e - (x->s + x->i + 9)), false);
            x->i = (size_t)(e + 3 - x->s);
            continue;
        }
        if (xml_starts(x, "<?")) {
            const char *e = NULL;
            for (size_t k = x->i + 2; k + 1 < x->n; k++) if (memcmp(x->s + k, "?>", 2) == 0) { e = x->s + k; break; }
            if (!e) { ok = xml_fail(x, "unexpected end of input") == 0; break; }
            bool decl = x->i + 5 <= x->n && mcdc_str_nieq(x->s + x->i + 2, "xml", 3) &&
                        (isspace((unsigned char)x->s[x->i + 5]) || x->s[x->i + 5] == '?');
            if (decl && (close || x->o->len)) { ok = xml_fail(x, "XML declaration allowed only at the start of the document") == 0; break; }
            if (!decl) mcdc_buf_append(x->o, x->s + x->i, (size_t)(e + 2 - (x->s + x->i)), NULL);
            x->i = (size_t)(e + 2 - x->s);
            continue;
        }
        if (xml_starts(x, "<!")) {
            ok = xml_fail(x, "parsing this DTD is not supported by the simulator") == 0;
            break;
        }
        ok = xml_element(x);
    }
    mcdc_buf_free(&text);
    return ok;
}

int sim_xml_normalize(const char *s, size_t n, mcdc_buf *out, char msg[SIM_UDT_MSG]) {
    mcdc_buf_reset(out);
    /* a byte order mark is not content; line ends are "\n" before parsing
     * (XML 1.0, 2.11); control characters other than tab and line ends
     * are not XML characters */
    size_t i = n >= 3 && (uint8_t)s[0] == 0xEF && (uint8_t)s[1] == 0xBB && (uint8_t)s[2] == 0xBF ? 3 : 0;
    mcdc_buf in = {0};
    for (; i < n; i++) {
        uint8_t c = (uint8_t)s[i];
        if (c == '\r') {
            if (i + 1 < n && s[i + 1] == '\n') i++;
            c = '\n';
        } else if (c < 0x20 && c != '\t' && c != '\n') {
            int line = 1;
            for (size_t k = 0; k < i; k++) line += s[k] == '\n';
            mcdc_buf_free(&in);
            return fail(msg, 9420, "XML parsing: line %d, character %zu, illegal xml character", line, i + 1);
        }
        mcdc_buf_append_byte(&in, c, NULL);
    }
    xp x = {in.data ? (const char *)in.data : "", in.len, 0, out, msg, 0, 0};
    xml_content(&x, NULL, 0);
    mcdc_buf_free(&in);
    return x.rc;
}

/* ---- sql_variant --------------------------------------------------------------------- */
int sim_variant_make(mcdc_buf *out, const sim_type *base, const char *val, size_t vn, mcdc_error *err) {
    char h[SIM_VARIANT_HEADER_MAX];
    size_t hn = sim_variant_header(h, sizeof h, base);
    mcdc_buf_reset(out);
    int rc = mcdc_buf_append(out, h, hn, err);
    if (rc == MCDC_OK && vn) rc = mcdc_buf_append(out, val, vn, err);
    return rc;
}

void sim_variant_plain_type(sqlite3_value *v, sim_type *out) {
    memset(out, 0, sizeof *out);
    switch (sqlite3_value_type(v)) {
    case SQLITE_INTEGER: {
        int64_t i = sqlite3_value_int64(v);
        out->id = i >= INT32_MIN && i <= INT32_MAX ? SIM_T_INT : SIM_T_BIGINT;
        break;
    }
    case SQLITE_FLOAT: out->id = SIM_T_FLOAT; break;
    case SQLITE_BLOB: {
        int n = sqlite3_value_bytes(v);
        out->id = SIM_T_VARBINARY;
        out->length = n < 1 ? 1 : n > 8000 ? 8000 : n;
        break;
    }
    default: {
        const unsigned char *t = sqlite3_value_text(v);
        size_t chars = 0;
        for (int k = 0; t && k < sqlite3_value_bytes(v); k++) chars += (t[k] & 0xC0) != 0x80;
        out->id = SIM_T_NVARCHAR;
        out->length = chars < 1 ? 1 : chars > 4000 ? 4000 : (int32_t)chars;
        break;
    }
    }
}

/* The comparison families of sql_variant (its documentation's data type
 * hierarchy): a higher family is greater. */
static int variant_family(sim_type_id id) {
    switch (id) {
    case SIM_T_DATETIME2: case SIM_T_DATETIMEOFFSET: case SIM_T_DATETIME: case SIM_T_SMALLDATETIME:
    case SIM_T_DATE: case SIM_T_TIME: return 6;
    case SIM_T_FLOAT: case SIM_T_REAL: return 5;
    case SIM_T_DECIMAL: case SIM_T_MONEY: case SIM_T_SMALLMONEY: case SIM_T_BIGINT: case SIM_T_INT:
    case SIM_T_SMALLINT: case SIM_T_TINYINT: case SIM_T_BIT: return 4;
    case SIM_T_NVARCHAR: case SIM_T_NCHAR: case SIM_T_VARCHAR: case SIM_T_CHAR: return 3;
    case SIM_T_VARBINARY: case SIM_T_BINARY: return 2;
    case SIM_T_UNIQUEIDENTIFIER: return 1;
    default: return 0;
    }
}

/* A date/time text as "YYYY-MM-DD HH:MM:SS.fffffff" (a time alone on
 * 1900-01-01, a date alone at midnight): ordered as text. */
static void dt_key(sim_type_id id, const char *v, size_t n, char out[40]) {
    char d[16] = "1900-01-01", t[24] = "00:00:00.0000000";
    if (id == SIM_T_TIME) snprintf(t, sizeof t, "%.*s", (int)(n < 20 ? n : 20), v);
    else {
        snprintf(d, sizeof d, "%.*s", (int)(n < 10 ? n : 10), v);
        if (n > 11) snprintf(t, sizeof t, "%.*s", (int)(n - 11 < 20 ? n - 11 : 20), v + 11);
    }
    size_t tl = strlen(t);
    if (tl < 8) tl = 8;
    char frac[8] = "0000000";
    const char *dot = strchr(t, '.');
    if (dot) for (int k = 0; k < 7 && dot[1 + k] >= '0' && dot[1 + k] <= '9'; k++) frac[k] = dot[1 + k];
    snprintf(out, 40, "%.10s %.8s.%s", d, t, frac);
}

static bool is_number(const char *s, size_t n) {
    char buf[64];
    if (n == 0 || n >= sizeof buf) return false;
    memcpy(buf, s, n);
    buf[n] = 0;
    char *e;
    (void)strtod(buf, &e);
    return e != buf && *e == 0 && !isspace((unsigned char)buf[0]);
}

int sim_variant_cmp(const char *a, size_t na, const char *b, size_t nb) {
    sim_type ta, tb;
    const char *va = a, *vb = b;
    size_t la = na, lb = nb;
    bool pa = !sim_variant_split(a, na, &ta, &va, &la), pb = !sim_variant_split(b, nb, &tb, &vb, &lb);
    /* a plain value (a literal compared with the column): a number is an
     * exact numeric, anything else a string */
    if (pa) { memset(&ta, 0, sizeof ta); ta.id = is_number(a, na) ? SIM_T_DECIMAL : SIM_T_NVARCHAR; }
    if (pb) { memset(&tb, 0, sizeof tb); tb.id = is_number(b, nb) ? SIM_T_DECIMAL : SIM_T_NVARCHAR; }
    int fa = variant_family(ta.id), fb = variant_family(tb.id);
    if (fa != fb) return fa < fb ? -1 : 1;
    switch (fa) {
    case 6: {
        if (ta.id == SIM_T_DATETIMEOFFSET && tb.id == SIM_T_DATETIMEOFFSET) return sim_dto_cmp(va, la, vb, lb);
        char ka[40], kb[40];
        dt_key(ta.id, va, la, ka);
        dt_key(tb.id, vb, lb, kb);
        int c = strcmp(ka, kb);
        return c < 0 ? -1 : c > 0;
    }
    case 5: case 4: {
        int c = sim_decimal_cmp(va, la, vb, lb);
        return c < 0 ? -1 : c > 0;
    }
    case 3: return sim_string_cmp(va, la, vb, lb);
    case 1: return sim_guid_cmp(va, la, vb, lb);
    default: {
        size_t m = la < lb ? la : lb;
        int c = memcmp(va, vb, m);
        if (c) return c < 0 ? -1 : 1;
        return la < lb ? -1 : la > lb;
    }
    }
}
