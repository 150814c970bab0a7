/*
 * mcdc_value_text.h - the one text form of batch values.
 *
 * Every place that turns a cell into text uses these functions: table-rows
 * JSON, Delta statistics, the TDS decoders' casts to text, scalar query
 * results, the test tools. The coming reconcile hashes rows read from the
 * lake and from SQL Server through the canonical form, so both sides must
 * give the same text for the same value: it is defined here, once, and
 * pinned by tests (tests/unit/test_value_text.c).
 *
 * The canonical form, by batch type:
 *   bool          "true" or "false"
 *   int8..int64   decimal digits, '-' when negative; no '+', no leading zeros
 *   decimal(p,s)  the exact value: '-' when negative (never for zero), the
 *                 integer digits ("0" when there are none), then, for s > 0,
 *                 '.' and exactly s digits: decimal(5,2) 1.5 is "1.50",
 *                 -0.05 is "-0.05". A valid JSON number.
 *   float/double  the fewest significant digits that read back (rounding to
 *                 nearest) as the same float/double (a float's own digits,
 *                 not its double's: 0.1f is "0.1"), laid out as ECMAScript's
 *                 Number.prototype.toString: plain below 1e21 and down to
 *                 1e-6 ("100", "0.000125", "123456789012345680000"), else
 *                 "1.25e-7", "1e+21". Zero is "0", negative zero "-0", and
 *                 "NaN", "Infinity", "-Infinity". Finite ones are JSON numbers.
 *   date32        "YYYY-MM-DD", proleptic Gregorian; a year outside 0-9999 is
 *                 written ISO 8601's expanded way: a sign and at least four
 *                 digits ("-0001-12-31", "+10000-01-01")
 *   timestamp_ntz "YYYY-MM-DDTHH:MM:SS.ffffff", always six fraction digits
 *   timestamp UTC the same followed by 'Z'
 *   utf8          the bytes as they are
 *   binary, fixed "0x" and two upper-case hex digits per byte ("0x" when empty)
 * NULL has no text: the cell functions take present values, the column
 * function keeps NULL as NULL (how a NULL enters a hash is the caller's).
 *
 * The scalar functions write at `out` without a NUL and return the length;
 * fixed-width values need at most MCDC_TEXT_FIXED_MAX bytes. Hot loops use
 * mcdc_text_column (one type switch per call, not per cell) or the scalar
 * functions directly, never mcdc_text_cell.
 */
#ifndef MCDC_VALUE_TEXT_H
#define MCDC_VALUE_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mcdc_batch.h"
#include "mcdc_util.h"

/* Longest text of a fixed-width value: a timestamp of year -290308 is 33
 * bytes, decimal(38,38) with its sign 41, a double 24. */
#define MCDC_TEXT_FIXED_MAX 48

size_t mcdc_text_bool(char *out, bool v);
size_t mcdc_text_int(char *out, int64_t v);
size_t mcdc_text_double(char *out, double v);
size_t mcdc_text_float(char *out, float v);
/* A decimal128 (two's complement halves, as mcdc_col_append_decimal takes
 * them) with `scale` digits after the point (0-38). */
size_t mcdc_text_decimal(char *out, uint64_t lo, int64_t hi, int32_t scale);
/* The same from sign and magnitude (the TDS wire's form); a zero magnitude
 * has no sign whatever neg says. */
size_t mcdc_text_decimal_parts(char *out, bool neg, uint64_t mag_lo, uint64_t mag_hi,
                               int32_t scale);
/* Days since 1970-01-01. */
size_t mcdc_text_date(char *out, int64_t days);
/* Microseconds since 1970-01-01; utc appends 'Z'. */
size_t mcdc_text_timestamp(char *out, int64_t us, bool utc);
/* The Delta statistics variant: the millisecond the value falls in
 * (rounded down), three fraction digits ("...T10:11:12.345[Z]"). */
size_t mcdc_text_timestamp_ms(char *out, int64_t us, bool utc);
/* "0x" + upper-case hex (2 + 2n bytes). */
size_t mcdc_text_hex(char *out, const uint8_t *p, size_t n);
/* The digits alone, upper or lower case (2n bytes). */
size_t mcdc_text_hex_digits(char *out, const uint8_t *p, size_t n, bool upper);

/* Appends the canonical text of row `row` of c (a present value) to out. */
int mcdc_text_cell(mcdc_buf *out, const mcdc_column *c, int64_t row, mcdc_error *err);
/* Appends the canonical text of rows [from, from + n) of in to out, a utf8
 * column, one value per row; a NULL stays NULL. Fails only on memory or the
 * batch limit (MCDC_E_LIMIT; take fewer rows at a time). */
int mcdc_text_column(mcdc_column *out, const mcdc_column *in, int64_t from, int64_t n,
                     mcdc_error *err);

/* ---- JSON ----------------------------------------------------------------
 * A value as JSON: null; bools and integers bare; finite floats bare, the
 * others as the strings "NaN", "Infinity", "-Infinity"; everything else
 * (decimals included) as a JSON string of its canonical text. */
int mcdc_text_cell_json(mcdc_buf *out, const mcdc_column *c, int64_t row, mcdc_error *err);
/* s (n bytes) as a JSON string literal: '"' and '\' escaped, \n \r \t,
 * other control bytes as \u00XX, the rest (UTF-8 included) as it is. */
int mcdc_text_json_string(mcdc_buf *out, const uint8_t *s, size_t n, mcdc_error *err);

#endif /* MCDC_VALUE_TEXT_H */
