/*
 * mcdc_batch_frame.h - a batch's columns as one raw frame: their buffers
 * as they are in memory, behind a small checked head.
 *
 * For bytes a process writes and reads back itself (the sorter's spilled
 * runs): no encoding, no compression, no decoding, where Parquet would do
 * all three for a private file read once. Not an interchange format: the
 * buffers are in host byte order, and only this build's reader knows them.
 *
 * A frame of n columns is
 *
 *   head       MCDC_FRAME_FIXED_BYTES: magic "MCBF", version, columns, rows,
 *              body bytes, the body's CRC-32C and the head's own CRC-32C (over
 *              the fixed part before it and the directory), little-endian
 *   directory  MCDC_FRAME_COL_BYTES per column: its type (and width,
 *              precision, scale), whether a validity bitmap follows, its
 *              NULLs, its data bytes (utf8/binary)
 *   body       per column in order: the validity bitmap ((rows + 7) / 8
 *              bytes, only when the column has NULLs), the values (rows x
 *              width; bool: (rows + 7) / 8) or the offsets ((rows + 1) x 4),
 *              then the data (utf8/binary)
 *
 * Every buffer's length follows from the rows and the directory, so the
 * head tells the body's size before it is read, and a reader can skip a
 * frame it does not want without reading its body (the sorter writes a
 * run's sort keys and its rows as two frames for that).
 *
 * Nothing read is trusted: the decoder checks both checksums, each
 * column's type against the schema it decodes into, that the buffers fill
 * the body exactly, NULLs only in nullable columns and as many as the
 * directory says, offsets from 0, non-decreasing, ending at the data's
 * length. A frame that fails any of it is MCDC_E_CORRUPT saying what was
 * wrong; the caller adds which file and which frame.
 */
#ifndef MCDC_BATCH_FRAME_H
#define MCDC_BATCH_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "mcdc_batch.h"

#define MCDC_FRAME_VERSION 1
#define MCDC_FRAME_FIXED_BYTES 32
#define MCDC_FRAME_COL_BYTES 24
/* Rows of one frame at most: a frame is a slice of a run, read while many
 * others are held (the sorter's are 8192). */
#define MCDC_FRAME_ROWS_MAX (1024 * 1024)

/* Bytes of the head (fixed part and directory) of a frame of n_cols columns. */
static inline size_t mcdc_frame_head_bytes(int32_t n_cols) {
    return MCDC_FRAME_FIXED_BYTES + (size_t)n_cols * MCDC_FRAME_COL_BYTES;
}

/* Receives a frame's bytes, in order, a piece at a time (n > 0). */
typedef int (*mcdc_frame_sink)(void *ctx, const void *p, size_t n, mcdc_error *err);

/* CRC-32C of n bytes at data continuing crc (0 to start), as the frame's
 * checksums are computed: hardware where the CPU has it, the same value
 * either way. */
uint32_t mcdc_frame_crc(uint32_t crc, const void *data, size_t n);

/* Writes one frame of rows [row0, row0 + rows) of b's columns [first,
 * first + n_cols) (row0 a multiple of 8, so that bitmaps slice at a byte;
 * rows at most MCDC_FRAME_ROWS_MAX): its head, then each buffer straight
 * from the columns (no copy of the body is made; only the offsets of a
 * slice not starting at row 0 are rebased), to sink. Stops at the sink's
 * first failure and returns it. */
int mcdc_frame_write(const mcdc_batch *b, int32_t first, int32_t n_cols, int64_t row0,
                     int64_t rows, mcdc_frame_sink sink, void *ctx, mcdc_error *err);
/* A frame of all the rows of those columns (which hold as many values)
 * appended to out. */
int mcdc_frame_append(mcdc_buf *out, const mcdc_batch *b, int32_t first, int32_t n_cols,
                      mcdc_error *err);

/* Checks the head of a frame of n_cols columns (mcdc_frame_head_bytes
 * bytes at head: magic, version, column count, checksum, limits) and gives
 * its rows and its body's bytes. MCDC_E_CORRUPT when any is wrong. */
int mcdc_frame_head(const uint8_t *head, int32_t n_cols, int64_t *rows, int64_t *body_bytes,
                    mcdc_error *err);

/* Decodes a frame (its head, checked as mcdc_frame_head does, and its
 * body_bytes bytes of body) into b's columns [first, first + n_cols), which
 * must be empty; the frame's types must be theirs. Seal b once every
 * column is filled. MCDC_E_CORRUPT (columns left partly filled: free b)
 * when the frame is not one of these columns or fails a check. */
int mcdc_frame_decode(mcdc_batch *b, int32_t first, int32_t n_cols, const uint8_t *head,
                      const uint8_t *body, size_t body_bytes, mcdc_error *err);

#endif /* MCDC_BATCH_FRAME_H */
