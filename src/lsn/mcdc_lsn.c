/* mcdc_lsn.c - LSN parsing, formatting, order and arithmetic. */
#include "mcdc_lsn.h"

#include <string.h>

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

bool mcdc_lsn_is_zero(const mcdc_lsn *l) {
    for (int i = 0; i < MCDC_LSN_BYTES; i++)
        if (l->b[i]) return false;
    return true;
}

/* Quotes at most 64 bytes of the input in error messages (bounded; an LSN
 * is 22 characters, anything longer is already wrong). */
static int parse_error(mcdc_error *err, const char *s, size_t n, const char *why) {
    int shown = n > 64 ? 64 : (int)n;
    return mcdc_error_set(err, MCDC_E_INVALID,
                          "invalid LSN '%.*s%s': %s; expected 0x followed by up to 20 hex "
                          "digits, e.g. 0x0000002A000001F00003",
                          shown, s ? s : "", n > 64 ? "..." : "", why);
}

int mcdc_lsn_parse(mcdc_lsn *out, const char *s, size_t n, mcdc_error *err) {
    MCDC_ASSERT(out != NULL);
    if (s == NULL || n == 0) return parse_error(err, "", 0, "empty");
    size_t i = 0;
    if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) i = 2;
    size_t digits = n - i;
    if (digits == 0) return parse_error(err, s, n, "no hex digits");
    if (digits > MCDC_LSN_HEX_DIGITS)
        return parse_error(err, s, n, "more than 20 hex digits");
    uint8_t nib[MCDC_LSN_HEX_DIGITS];
    size_t pad = MCDC_LSN_HEX_DIGITS - digits;
    memset(nib, 0, pad);
    for (size_t k = 0; k < digits; k++) {
        int v = hex_value(s[i + k]);
        if (v < 0) return parse_error(err, s, n, "not a hex digit");
        nib[pad + k] = (uint8_t)v;
    }
    for (int b = 0; b < MCDC_LSN_BYTES; b++)
        out->b[b] = (uint8_t)((nib[2 * b] << 4) | nib[2 * b + 1]);
    return MCDC_OK;
}

int mcdc_lsn_parse_cstr(mcdc_lsn *out, const char *s, mcdc_error *err) {
    if (s == NULL) return parse_error(err, "", 0, "missing");
    return mcdc_lsn_parse(out, s, strlen(s), err);
}

void mcdc_lsn_format(const mcdc_lsn *l, char out[MCDC_LSN_TEXT_LEN + 1]) {
    static const char hex[] = "0123456789ABCDEF";
    out[0] = '0';
    out[1] = 'x';
    for (int b = 0; b < MCDC_LSN_BYTES; b++) {
        out[2 + 2 * b] = hex[l->b[b] >> 4];
        out[3 + 2 * b] = hex[l->b[b] & 15];
    }
    out[MCDC_LSN_TEXT_LEN] = 0;
}

mcdc_lsn mcdc_lsn_from_bytes(const uint8_t bytes[MCDC_LSN_BYTES]) {
    mcdc_lsn l;
    memcpy(l.b, bytes, MCDC_LSN_BYTES);
    return l;
}

int mcdc_lsn_cmp(const mcdc_lsn *a, const mcdc_lsn *b) {
    return memcmp(a->b, b->b, MCDC_LSN_BYTES);
}

int mcdc_lsn_increment(mcdc_lsn *out, const mcdc_lsn *in, mcdc_error *err) {
    mcdc_lsn r = *in;
    for (int i = MCDC_LSN_BYTES - 1; i >= 0; i--) {
        if (r.b[i] != 0xFF) {
            r.b[i]++;
            *out = r;
            return MCDC_OK;
        }
        r.b[i] = 0;
    }
    return mcdc_error_set(err, MCDC_E_INVALID,
                          "cannot increment LSN 0xFFFFFFFFFFFFFFFFFFFF: it is the largest LSN");
}

int mcdc_lsn_decrement(mcdc_lsn *out, const mcdc_lsn *in, mcdc_error *err) {
    if (mcdc_lsn_is_zero(in))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "cannot decrement LSN 0x00000000000000000000: it is the zero LSN");
    mcdc_lsn r = *in;
    for (int i = MCDC_LSN_BYTES - 1; i >= 0; i--) {
        if (r.b[i] != 0) {
            r.b[i]--;
            break;
        }
        r.b[i] = 0xFF;
    }
    *out = r;
    return MCDC_OK;
}

mcdc_u128 mcdc_lsn_to_u128(const mcdc_lsn *l) {
    mcdc_u128 v = 0;
    for (int i = 0; i < MCDC_LSN_BYTES; i++) v = (v << 8) | l->b[i];
    return v;
}

int mcdc_lsn_from_u128(mcdc_lsn *out, mcdc_u128 v, mcdc_error *err) {
    if ((v >> 80) != 0)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "integer does not fit an LSN: LSNs are below 2^80");
    for (int i = MCDC_LSN_BYTES - 1; i >= 0; i--) {
        out->b[i] = (uint8_t)(v & 0xFF);
        v >>= 8;
    }
    return MCDC_OK;
}

void mcdc_lsn_to_pair(uint64_t *out_hi, uint64_t *out_lo, const mcdc_lsn *l) {
    mcdc_u128 v = mcdc_lsn_to_u128(l);
    *out_hi = (uint64_t)(v >> 64);
    *out_lo = (uint64_t)v;
}

int mcdc_lsn_from_pair(mcdc_lsn *out, uint64_t hi, uint64_t lo, mcdc_error *err) {
    if (hi >> 16)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "integer does not fit an LSN: high part %llu is above 65535",
                              (unsigned long long)hi);
    return mcdc_lsn_from_u128(out, ((mcdc_u128)hi << 64) | lo, err);
}
