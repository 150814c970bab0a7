/*
 * mcdc_delta_dv.h - Delta deletion vectors (PROTOCOL.md "Deletion Vectors"
 * and appendix "Deletion Vector Format"): descriptors, Z85, the
 * RoaringBitmapArray serialization, DV files, and the row sets readers
 * skip. Every byte read is untrusted: a bad descriptor, file or bitmap is
 * MCDC_E_CORRUPT naming the data file, the DV file and what is wrong.
 *
 * Formats (all checked on read, produced on write):
 *   bitmap   = magic 1681511377 (u32 LE), numBuckets (u64 LE), then per
 *              bucket in ascending key order: key (u32 LE, high bit 0 =
 *              the row's upper 32 bits) + a portable 32-bit roaring bitmap
 *              of the lower 32 bits (CRoaring's portable format). Read
 *              also: the older "native" form (magic 1681511376 BE, count
 *              BE, per bucket its size BE and the bitmap, keys 0, 1, ...),
 *              which the protocol's inline example uses.
 *   DV file  = version byte 1, then per DV: dataSize (u32 BE), the bitmap
 *              (dataSize bytes), CRC-32 of the bitmap (u32 BE). A
 *              descriptor's offset points at its dataSize.
 *   'u' path = <prefix>/deletion_vector_<uuid>.bin under the table, the
 *              UUID being the last 20 Z85 characters (16 bytes, big-endian
 *              msb then lsb), the prefix (may be empty) the ones before.
 *   'i'      = Z85 of the bitmap padded with zeros to a multiple of 4,
 *              sizeInBytes the unpadded length.
 */
#ifndef MCDC_DELTA_DV_H
#define MCDC_DELTA_DV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "mcdc_delta.h"

#define MCDC_DV_MAGIC 1681511377u
#define MCDC_DV_FILE_VERSION 1
/* The Z85 of a UUID. */
#define MCDC_DV_UUID_Z85_LEN 20

/* ---- Z85 ------------------------------------------------------------------ */

/* Z85 of n bytes (n a multiple of 4) into out (n / 4 * 5 chars + NUL). */
void mcdc_z85_encode(char *out, const uint8_t *in, size_t n);
/* Decodes n chars (a multiple of 5) into out (n / 5 * 4 bytes): false when
 * a character is not Z85 or a group exceeds 32 bits. */
bool mcdc_z85_decode(uint8_t *out, const char *in, size_t n);

/* ---- descriptors ------------------------------------------------------------ */

/* Checks a descriptor's fields (storage type, sizes, offset presence, the
 * 'u' form, the inline length) and computes its unique id
 * (<type><pathOrInlineDv>[@<offset>]) into *out_uid (owned). what names the
 * action in messages ("add of part-0001.parquet"). */
int mcdc_dv_check_descriptor(char **out_uid, const mcdc_delta_dv *dv, const char *what,
                             mcdc_error *err);
/* The descriptor as the JSON object add/remove actions carry (a new
 * reference, NULL when out of memory). */
json_t *mcdc_dv_descriptor_json(const mcdc_delta_dv *dv);
/* The DV file's key relative to the table root ('u'), or the absolute
 * location ('p'); *out owned. Inline: MCDC_E_INVALID. */
int mcdc_dv_file_key(char **out, const mcdc_delta_dv *dv, mcdc_error *err);

/* ---- bitmaps (sets of 64-bit row positions) ------------------------------------ */

typedef struct mcdc_dv_bitmap mcdc_dv_bitmap;
int mcdc_dv_bitmap_create(mcdc_dv_bitmap **out, mcdc_error *err);
void mcdc_dv_bitmap_free(mcdc_dv_bitmap *b);
int mcdc_dv_bitmap_add(mcdc_dv_bitmap *b, uint64_t row, mcdc_error *err);
/* Adds every row of src. */
int mcdc_dv_bitmap_add_all(mcdc_dv_bitmap *b, const mcdc_dv_bitmap *src, mcdc_error *err);
bool mcdc_dv_bitmap_contains(const mcdc_dv_bitmap *b, uint64_t row);
uint64_t mcdc_dv_bitmap_cardinality(const mcdc_dv_bitmap *b);
/* Rows in [lo, hi). */
uint64_t mcdc_dv_bitmap_range_count(const mcdc_dv_bitmap *b, uint64_t lo, uint64_t hi);
/* The largest row, -1 when empty. */
int64_t mcdc_dv_bitmap_max(const mcdc_dv_bitmap *b);
/* The positions i in [0, n) whose row first + i is NOT in b, into keep
 * (n entries), their count into *n_keep; walks the set bits of the range,
 * not one test per row. */
void mcdc_dv_bitmap_keep(const mcdc_dv_bitmap *b, uint64_t first, int32_t n, int32_t *keep,
                         int32_t *n_keep);
/* The RoaringBitmapArray serialization (magic included) appended to out. */
int mcdc_dv_bitmap_serialize(mcdc_buf *out, const mcdc_dv_bitmap *b, mcdc_error *err);
/* Parses one serialized bitmap (exactly n bytes). label names it. */
int mcdc_dv_bitmap_parse(mcdc_dv_bitmap **out, const void *data, size_t n, const char *label,
                         mcdc_error *err);

/* ---- reading ---------------------------------------------------------------------- */

/* Parses the DV at offset of a DV file held in memory (the whole file or a
 * prefix holding it): version byte, size == expected, bitmap, CRC. */
int mcdc_dv_file_parse(mcdc_dv_bitmap **out, const void *file, size_t len, int64_t offset,
                       int32_t expected_size, const char *label, mcdc_error *err);
/* Decodes an inline ('i') descriptor's bitmap. */
int mcdc_dv_inline_parse(mcdc_dv_bitmap **out, const mcdc_delta_dv *dv, const char *label,
                         mcdc_error *err);
/* Loads and validates the deletion vector of data file f of a table (its
 * storage st): the bitmap's cardinality equals the descriptor's, its largest
 * row is below max_row_index (when given) and below file_rows (when >= 0).
 * 'p' descriptors must lie under the table root (root: its location). */
int mcdc_dv_load(mcdc_dv_bitmap **out, mcdc_storage *st, const char *root,
                 const mcdc_delta_file *f, int64_t file_rows, mcdc_error *err);

/* ---- writing -------------------------------------------------------------------- */

/* A DV file being built: one per commit, holding the new DVs of many data
 * files. Descriptors it hands out are 'u' with an empty prefix and point
 * into the file written by mcdc_dv_writer_finish. */
typedef struct mcdc_dv_writer mcdc_dv_writer;
int mcdc_dv_writer_create(mcdc_dv_writer **out, mcdc_error *err);
void mcdc_dv_writer_free(mcdc_dv_writer *w);
/* Appends b; *out gets its descriptor (path_or_inline borrowed from w). */
int mcdc_dv_writer_add(mcdc_dv_writer *w, const mcdc_dv_bitmap *b, mcdc_delta_dv *out,
                       mcdc_error *err);
/* Writes the file under st (put-if-absent; nothing when no DV was added);
 * *key (optional, borrowed) gets its key. */
int mcdc_dv_writer_finish(mcdc_dv_writer *w, mcdc_storage *st, const char **key,
                          mcdc_error *err);

#endif /* MCDC_DELTA_DV_H */
