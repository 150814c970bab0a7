/*
 * mcdc_values_api.c - the public text forms of LSNs and timestamps
 * (include/mssqlcdc.h, "Values"): checked wrappers over the engine's own
 * parsers and formatters, so that programs and bindings read and write
 * exactly the texts the engine does.
 */
#include <string.h>

#include "mcdc_lsn.h"

_Static_assert(MCDC_LSN_VALUE_BYTES == MCDC_LSN_BYTES, "the public LSN is the engine's LSN");
_Static_assert(MCDC_LSN_TEXT_SIZE == MCDC_LSN_TEXT_LEN + 1, "public LSN text size");
_Static_assert(sizeof(mcdc_lsn_value) == sizeof(mcdc_lsn), "LSN value layout");

int mcdc_lsn_value_parse(mcdc_lsn_value *out, const char *text, mcdc_error *err) {
    if (out == NULL) return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_lsn_value_parse: out is NULL");
    if (text == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_lsn_value_parse: text is NULL");
    mcdc_lsn l;
    int rc = mcdc_lsn_parse_cstr(&l, text, err);
    if (rc != MCDC_OK) return rc;
    memcpy(out->bytes, l.b, MCDC_LSN_BYTES);
    return MCDC_OK;
}

int mcdc_lsn_value_format(char *out, size_t out_size, const mcdc_lsn_value *lsn,
                          mcdc_error *err) {
    if (out == NULL || lsn == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_lsn_value_format: %s is NULL",
                              out == NULL ? "out" : "lsn");
    if (out_size < MCDC_LSN_TEXT_SIZE)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "mcdc_lsn_value_format: out_size is %zu; an LSN's text needs "
                              "MCDC_LSN_TEXT_SIZE (%d) bytes",
                              out_size, MCDC_LSN_TEXT_SIZE);
    mcdc_lsn l = mcdc_lsn_from_bytes(lsn->bytes);
    mcdc_lsn_format(&l, out);
    return MCDC_OK;
}

int mcdc_ts_parse(int64_t *out_us, const char *text, mcdc_error *err) {
    if (out_us == NULL) return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_ts_parse: out_us is NULL");
    if (text == NULL) return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_ts_parse: text is NULL");
    return mcdc_parse_ts_us(text, strlen(text), out_us, err);
}

/* Years 0001-9999, the range of SQL Server's datetime2 and of four-digit
 * ISO years (beyond it the engine's formatter would overflow near INT64_MIN). */
#define TS_US_MIN (-62135596800000000LL)  /* 0001-01-01T00:00:00 */
#define TS_US_MAX (253402300799999999LL)  /* 9999-12-31T23:59:59.999999 */

int mcdc_ts_format(char *out, size_t out_size, int64_t us, int frac_digits, mcdc_error *err) {
    if (out == NULL) return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_ts_format: out is NULL");
    if (frac_digits != 0 && frac_digits != 3 && frac_digits != 6)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "mcdc_ts_format: frac_digits is %d; use 0, 3 or 6", frac_digits);
    if (out_size < MCDC_TS_TEXT_SIZE)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "mcdc_ts_format: out_size is %zu; a timestamp's text needs "
                              "MCDC_TS_TEXT_SIZE (%d) bytes",
                              out_size, MCDC_TS_TEXT_SIZE);
    if (us < TS_US_MIN || us > TS_US_MAX)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "mcdc_ts_format: %lld microseconds is outside years 0001-9999",
                              (long long)us);
    mcdc_format_ts_us(us, frac_digits, out);
    return MCDC_OK;
}
