/* mcdc_period.c - periods of the verdict: truncation by granularity. */
#include "mcdc_finalization.h"

#include <stdint.h>

int64_t mcdc_truncate_us(int64_t us, mcdc_granularity g) {
    int64_t unit;
    switch (g) {
    case MCDC_GRANULARITY_MINUTE: unit = 60LL * 1000000; break;
    case MCDC_GRANULARITY_HOUR: unit = 3600LL * 1000000; break;
    case MCDC_GRANULARITY_DAY: unit = 86400LL * 1000000; break;
    default: return INT64_MIN; /* a caller's bad enum: documented, never an abort */
    }
    int64_t q = us / unit;
    if (us % unit != 0 && us < 0) q--;
    if (q < INT64_MIN / unit) return INT64_MIN; /* the period would start before INT64_MIN */
    return q * unit;
}

int mcdc_granularity_parse(const char *s, mcdc_granularity *out, mcdc_error *err) {
    if (s == NULL || out == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_granularity_parse: %s is NULL",
                              s == NULL ? "s" : "out");
    if (mcdc_str_ieq(s, "hour")) *out = MCDC_GRANULARITY_HOUR;
    else if (mcdc_str_ieq(s, "minute")) *out = MCDC_GRANULARITY_MINUTE;
    else if (mcdc_str_ieq(s, "day")) *out = MCDC_GRANULARITY_DAY;
    else
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "granularity must be hour, minute or day, not '%s'", s);
    return MCDC_OK;
}
