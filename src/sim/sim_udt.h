/*
 * sim_udt.h - the values of SQL Server's CLR types, xml and sql_variant in
 * the simulator.
 *
 *   hierarchyid        the compact binary SQL Server stores and sends
 *                      (MS-SSCLRT 2.1: one bit pattern per label, the
 *                      label's range by its prefix, a last bit that ends the
 *                      node, zero bits up to a byte). Binary order is SQL
 *                      Server's order (depth first), so the BLOB compares
 *                      as SQL Server compares the values.
 *   geography,         SQL Server's serialization (MS-SSCLRT 2.1, version 1):
 *   geometry           SRID, version, properties, points, figures, shapes;
 *                      geography points as (latitude, longitude). In from
 *                      WKT (2D: POINT .. GEOMETRYCOLLECTION, EMPTY) and WKB,
 *                      out as WKT (STAsText, ToString) and WKB (STAsBinary).
 *   xml                text as SQL Server serializes a stored value: no XML
 *                      declaration, entities resolved and escaped again,
 *                      attributes in double quotes, empty elements "<a />",
 *                      whitespace-only text between tags dropped, CDATA as
 *                      text.
 *   sql_variant        text: its base type and the value (sim_variant.h).
 *
 * Every function returns 0 or SQL Server's error number, its text in msg.
 */
#ifndef SIM_UDT_H
#define SIM_UDT_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mcdc_util.h"
#include "sim_engine.h"
#include "sim_variant.h"

#define SIM_UDT_MSG 320

/* ---- hierarchyid ---------------------------------------------------------- */
int sim_hid_from_text(const char *s, size_t n, mcdc_buf *out, char msg[SIM_UDT_MSG]);
int sim_hid_to_text(const uint8_t *p, size_t n, mcdc_buf *out, char msg[SIM_UDT_MSG]);
/* GetLevel (-1: not a hierarchyid). */
int sim_hid_level(const uint8_t *p, size_t n);
/* GetAncestor(k): *null when k > the level. */
int sim_hid_ancestor(const uint8_t *p, size_t n, int64_t k, mcdc_buf *out, bool *null, char msg[SIM_UDT_MSG]);
/* IsDescendantOf(parent): 1, 0, or -1 (not hierarchyids). */
int sim_hid_is_descendant(const uint8_t *p, size_t n, const uint8_t *q, size_t qn);

/* ---- geography / geometry --------------------------------------------------- */
int sim_geo_from_wkt(const char *s, size_t n, int64_t srid, bool geography, mcdc_buf *out, char msg[SIM_UDT_MSG]);
int sim_geo_from_wkb(const uint8_t *p, size_t n, int64_t srid, bool geography, mcdc_buf *out,
                     char msg[SIM_UDT_MSG]);
/* geography::Point(lat, long, srid) / geometry::Point(x, y, srid). */
int sim_geo_point(double a, double b, int64_t srid, bool geography, mcdc_buf *out, char msg[SIM_UDT_MSG]);
/* Checks serialized bytes (CAST(0x... AS geometry)): 0 when they parse. */
int sim_geo_check(const uint8_t *p, size_t n, bool geography, char msg[SIM_UDT_MSG]);
int sim_geo_to_wkt(const uint8_t *p, size_t n, bool geography, mcdc_buf *out, char msg[SIM_UDT_MSG]);
int sim_geo_to_wkb(const uint8_t *p, size_t n, bool geography, mcdc_buf *out, char msg[SIM_UDT_MSG]);
/* STSrid; false when the bytes are too short. */
bool sim_geo_srid(const uint8_t *p, size_t n, int32_t *srid);
/* what: 0 Lat/STY, 1 Long/STX (geography: Lat, Long; geometry: STY, STX);
 * *null when the value is no single point. */
int sim_geo_coord(const uint8_t *p, size_t n, bool geography, int what, double *out, bool *null,
                  char msg[SIM_UDT_MSG]);
/* STGeometryType ("Point" ...) into out (cap >= 32); STNumPoints. */
int sim_geo_type_name(const uint8_t *p, size_t n, bool geography, char *out, size_t cap, char msg[SIM_UDT_MSG]);
int sim_geo_num_points(const uint8_t *p, size_t n, bool geography, int64_t *out, char msg[SIM_UDT_MSG]);

/* ---- xml ------------------------------------------------------------------------ */
int sim_xml_normalize(const char *s, size_t n, mcdc_buf *out, char msg[SIM_UDT_MSG]);

/* ---- sql_variant ------------------------------------------------------------------ */
/* A variant of base type base and value text val into out (reset first). */
int sim_variant_make(mcdc_buf *out, const sim_type *base, const char *val, size_t vn, mcdc_error *err);
/* The base type a plain SQLite value gets: int/bigint, float, nvarchar(n),
 * varbinary(n). */
void sim_variant_plain_type(sqlite3_value *v, sim_type *out);
/* The sql_variant of v as a SQLite function result: of type base (its
 * storage form already), or the type its storage class gives (base NULL);
 * a variant passes as it is. */
void sim_variant_result(sqlite3_context *ctx, sqlite3_value *v, const sim_type *base);
/* Compares two variant (or plain) values as SQL Server compares sql_variant:
 * by type family first, then by value within a family. */
int sim_variant_cmp(const char *a, size_t na, const char *b, size_t nb);
#define SIM_VARIANT_COLLATION "sim_variant"

/* Registers the SQLite functions of these types (sim_hid_*, sim_geo_*,
 * sim_to_variant, sim_variant_property, sim_variant_value) and the
 * sim_variant collation on db. */
int sim_udt_register(sqlite3 *db);

#endif
