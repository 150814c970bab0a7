/* mcdc_ewkb.c - SQL Server's spatial read into EWKB, in place (mcdc_ewkb.h). */
#include "mcdc_ewkb.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

#include "mcdc_limits.h"

#define EWKB_SRID 0x20000000u

/* The WKB geometry types SQL Server writes (OGC 1-7, SQL/MM curves 8-10)
 * and the two curve collections of SQL/MM (11, 12). */
enum {
    G_POINT = 1, G_LINESTRING, G_POLYGON, G_MULTIPOINT, G_MULTILINESTRING, G_MULTIPOLYGON,
    G_COLLECTION, G_CIRCULARSTRING, G_COMPOUNDCURVE, G_CURVEPOLYGON, G_MULTICURVE,
    G_MULTISURFACE
};

typedef struct walk {
    uint8_t *p;
    size_t n, off;
    char *why;
} walk;

static int fail(walk *w, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(w->why, MCDC_EWKB_WHY_BYTES, fmt, ap);
    va_end(ap);
    size_t at = k < 0 ? 0 : (size_t)k < MCDC_EWKB_WHY_BYTES ? (size_t)k : MCDC_EWKB_WHY_BYTES - 1;
    snprintf(w->why + at, MCDC_EWKB_WHY_BYTES - at, " at byte %zu of %zu", w->off, w->n);
    return -1;
}

static uint32_t rd32(const uint8_t *p, bool le) {
    return le ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24
              : (uint32_t)p[3] | (uint32_t)p[2] << 8 | (uint32_t)p[1] << 16 | (uint32_t)p[0] << 24;
}

static void wr32(uint8_t *p, uint32_t v, bool le) {
    for (int i = 0; i < 4; i++) p[le ? i : 3 - i] = (uint8_t)(v >> (8 * i));
}

/* A count at the cursor whose items take at least item_bytes each. */
static int count(walk *w, bool le, size_t item_bytes, uint32_t *out) {
    if (w->n - w->off < 4) return fail(w, "a count cut short");
    *out = rd32(w->p + w->off, le);
    w->off += 4;
    if ((uint64_t)*out * item_bytes > w->n - w->off)
        return fail(w, "a count of %lu that the %zu bytes left cannot hold", (unsigned long)*out,
                    w->n - w->off);
    return 0;
}

static int points(walk *w, bool le, size_t point_bytes) {
    uint32_t k;
    if (count(w, le, point_bytes, &k)) return -1;
    w->off += (size_t)k * point_bytes;
    return 0;
}

static int geometry(walk *w, int depth, bool top);

/* The body of a geometry of type base (after its header). */
static int body(walk *w, uint32_t base, bool le, size_t point_bytes, int depth) {
    switch (base) {
    case G_POINT:
        if (w->n - w->off < point_bytes) return fail(w, "a point cut short");
        w->off += point_bytes;
        return 0;
    case G_LINESTRING:
    case G_CIRCULARSTRING: return points(w, le, point_bytes);
    case G_POLYGON: {
        uint32_t rings;
        if (count(w, le, 4, &rings)) return -1;
        for (uint32_t r = 0; r < rings; r++)
            if (points(w, le, point_bytes)) return -1;
        return 0;
    }
    default: { /* collections: geometries with headers of their own */
        uint32_t parts;
        if (count(w, le, 9, &parts)) return -1; /* a header and a count at least */
        for (uint32_t i = 0; i < parts; i++)
            if (geometry(w, depth + 1, false)) return -1;
        return 0;
    }
    }
}

/* A header (byte order, type) at the cursor, then its body; on top, the
 * type gets the SRID flag (the caller has put the SRID after it). */
static int geometry(walk *w, int depth, bool top) {
    if (depth > MCDC_WKB_DEPTH_MAX)
        return fail(w, "geometries nested deeper than %d", MCDC_WKB_DEPTH_MAX);
    if (w->n - w->off < 5) return fail(w, "a geometry header cut short");
    uint8_t order = w->p[w->off];
    if (order > 1) return fail(w, "byte order %u (0 or 1)", order);
    bool le = order == 1;
    uint32_t type = rd32(w->p + w->off + 1, le), iso = type / 1000, base = type % 1000;
    if (iso > 3 || base < G_POINT || base > G_MULTISURFACE)
        return fail(w, "geometry type %lu, which SQL Server does not write", (unsigned long)type);
    if (top) wr32(w->p + w->off + 1, type | EWKB_SRID, le);
    w->off += top ? 9 : 5;
    bool z = iso == 1 || iso == 3, m = iso == 2 || iso == 3;
    return body(w, base, le, 8u * (2u + z + m), depth);
}

int mcdc_ewkb_from_srid_wkb(uint8_t *p, size_t n, char why[MCDC_EWKB_WHY_BYTES]) {
    walk w = {p, n, 0, why};
    why[0] = 0;
    if (n < 9) return fail(&w, "%zu bytes: no SRID and WKB header", n);
    uint32_t srid = rd32(p, false);
    uint8_t order = p[4];
    if (order > 1) {
        w.off = 4;
        return fail(&w, "byte order %u (0 or 1)", order);
    }
    /* [srid][order][type] -> [order][type][srid]: the type is rewritten
     * by the walk, the SRID goes in the value's own byte order. */
    uint8_t type[4] = {p[5], p[6], p[7], p[8]};
    p[0] = order;
    for (int i = 0; i < 4; i++) p[1 + i] = type[i];
    wr32(p + 5, srid, order == 1);
    if (geometry(&w, 0, true)) return -1;
    if (w.off != n) return fail(&w, "%zu bytes after the geometry", n - w.off);
    return 0;
}

int mcdc_ewkb_column(mcdc_column *c, mcdc_error *err) {
    MCDC_ASSERT(c->field->type == MCDC_TYPE_BINARY && c->offsets != NULL);
    for (int64_t r = 0; r < c->length; r++) {
        if (!mcdc_col_is_valid(c, r)) continue;
        char why[MCDC_EWKB_WHY_BYTES];
        uint8_t *v = c->data + c->offsets[r];
        size_t len = (size_t)(c->offsets[r + 1] - c->offsets[r]);
        if (mcdc_ewkb_from_srid_wkb(v, len, why) != 0)
            return mcdc_error_set(err, MCDC_E_PROTOCOL,
                                  "column '%s', row %lld: the server's SRID and WKB of a "
                                  "spatial value do not parse: %s",
                                  c->field->name, (long long)r, why);
    }
    return MCDC_OK;
}
