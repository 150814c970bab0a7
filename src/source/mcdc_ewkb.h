/*
 * mcdc_ewkb.h - a geography or geometry value as bronze holds it: EWKB.
 *
 * The change-row and snapshot SELECTs read a spatial column as one varbinary:
 * its SRID as binary(4) (big endian, SQL Server's integer to binary), then
 * x.AsBinaryZM(), the OGC WKB with the value's Z and M (ISO type codes:
 * 1001 a point with Z, 2001 with M, 3001 with both). Here the SRID moves
 * into the first header as EWKB carries it: the SRID flag 0x20000000 in the
 * type code, the SRID after it in the value's byte order. Everything else
 * is SQL Server's bytes, so a 2D value (nearly every one) is exactly the
 * EWKB PostGIS writes; one with Z or M keeps the ISO codes, which GEOS
 * (shapely), PostGIS and JTS (Sedona) read next to the SRID flag, and which
 * Spark's st_geomfromwkb reads once the SRID is taken out (docs/tables.md).
 * The value keeps its length: 4 + 5 + body bytes in, 5 + 4 + body out, so a
 * column is rewritten where it lies.
 *
 * Every byte is checked against the WKB grammar (byte order, type, counts,
 * nesting up to MCDC_WKB_DEPTH_MAX, nothing after the geometry); bytes that
 * are not a value SQL Server writes are refused, never passed on.
 */
#ifndef MCDC_EWKB_H
#define MCDC_EWKB_H

#include <stddef.h>
#include <stdint.h>

#include "mcdc_batch.h"

#define MCDC_EWKB_WHY_BYTES 160

/* p[0, n): SRID (4 bytes, big endian) then WKB, rewritten as EWKB in place.
 * 0, or -1 with why (what is wrong and at which byte) filled. */
int mcdc_ewkb_from_srid_wkb(uint8_t *p, size_t n, char why[MCDC_EWKB_WHY_BYTES]);

/* Every valid value of c (a binary column as the spatial read fills it);
 * MCDC_E_PROTOCOL naming the column and row for a value that is not. */
int mcdc_ewkb_column(mcdc_column *c, mcdc_error *err);

#endif /* MCDC_EWKB_H */
