/*
 * mcdc_lsn.h - SQL Server log sequence numbers (LSNs) as a value type.
 *
 * An LSN is 10 bytes compared as a big-endian unsigned number. Its text form
 * everywhere in mssql-cdc is "0x" + 20 uppercase hex digits (22 characters),
 * the output of CONVERT(varchar(22), lsn, 1): fixed width, so string order is
 * LSN order. __$seqval uses the same format.
 *
 * Arithmetic here (+1/-1) is plain integer arithmetic on the 80-bit value.
 * The reader asks SQL Server (sys.fn_cdc_increment_lsn) where the server's
 * answer matters; these are for tests, the simulator and local bounds.
 */
#ifndef MCDC_LSN_H
#define MCDC_LSN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mcdc_util.h"

#define MCDC_LSN_BYTES 10
#define MCDC_LSN_HEX_DIGITS 20
/* "0x" + 20 hex digits, without the NUL. */
#define MCDC_LSN_TEXT_LEN 22

typedef struct mcdc_lsn {
    uint8_t b[MCDC_LSN_BYTES]; /* big-endian: b[0] most significant */
} mcdc_lsn;
_Static_assert(sizeof(mcdc_lsn) == MCDC_LSN_BYTES, "an LSN is 10 bytes on the wire");

/* 128-bit unsigned integer (GCC/Clang extension), for LSN arithmetic. */
__extension__ typedef unsigned __int128 mcdc_u128;

/* The zero LSN (0x00000000000000000000). */
static inline mcdc_lsn mcdc_lsn_zero(void) {
    mcdc_lsn z = {{0}};
    return z;
}
bool mcdc_lsn_is_zero(const mcdc_lsn *l);

/* Parses text: optional "0x"/"0X", 1-20 hex digits in any case, left-padded
 * with zeros. Anything else (empty, more than 20 digits, a non-hex character,
 * surrounding spaces) is MCDC_E_INVALID with a message quoting the input.
 * n is the length of s (s need not be NUL-terminated). */
int mcdc_lsn_parse(mcdc_lsn *out, const char *s, size_t n, mcdc_error *err);
/* Same for a NUL-terminated string (NULL is invalid). */
int mcdc_lsn_parse_cstr(mcdc_lsn *out, const char *s, mcdc_error *err);
/* Canonical text "0x" + 20 uppercase hex digits, NUL-terminated. */
void mcdc_lsn_format(const mcdc_lsn *l, char out[MCDC_LSN_TEXT_LEN + 1]);
/* From exactly 10 raw bytes (binary(10) as SQL Server sends it). */
mcdc_lsn mcdc_lsn_from_bytes(const uint8_t bytes[MCDC_LSN_BYTES]);

/* <0, 0, >0 as a is before, equal to, after b. */
int mcdc_lsn_cmp(const mcdc_lsn *a, const mcdc_lsn *b);

/* out = in + 1; MCDC_E_INVALID when in is the largest LSN (2^80 - 1). */
int mcdc_lsn_increment(mcdc_lsn *out, const mcdc_lsn *in, mcdc_error *err);
/* out = in - 1; MCDC_E_INVALID when in is zero. */
int mcdc_lsn_decrement(mcdc_lsn *out, const mcdc_lsn *in, mcdc_error *err);

/* Integer conversions. An LSN is in [0, 2^80). */
mcdc_u128 mcdc_lsn_to_u128(const mcdc_lsn *l);
/* MCDC_E_INVALID when v >= 2^80. */
int mcdc_lsn_from_u128(mcdc_lsn *out, mcdc_u128 v, mcdc_error *err);
/* hi holds the top 16 bits, lo the low 64. */
void mcdc_lsn_to_pair(uint64_t *out_hi, uint64_t *out_lo, const mcdc_lsn *l);
/* MCDC_E_INVALID when hi >= 2^16. */
int mcdc_lsn_from_pair(mcdc_lsn *out, uint64_t hi, uint64_t lo, mcdc_error *err);

#endif /* MCDC_LSN_H */
