/*
 * sim_tz.h - time zones for the simulator: Windows zone names mapped to IANA
 * names, offsets computed from /usr/share/zoneinfo TZif files parsed here.
 * Thread-safe: parsed zones are cached process-wide and never change.
 */
#ifndef SIM_TZ_H
#define SIM_TZ_H

#include <stdint.h>

#include "mcdc_util.h"

typedef struct sim_tz sim_tz;

/* Looks up a Windows zone name ("Eastern Standard Time", "UTC", ...),
 * case-insensitive. Returns NULL (err filled) for an unknown name. The
 * result is borrowed from the process cache (valid until sim_tz_shutdown). */
const sim_tz *sim_tz_get(const char *windows_name, mcdc_error *err);
/* The Windows name as spelled in the map (borrowed). */
const char *sim_tz_name(const sim_tz *z);
/* UTC offset in seconds in force at the instant utc_s (seconds since 1970). */
int sim_tz_offset_at(const sim_tz *z, int64_t utc_s);
/* Offset in seconds for a local wall time (seconds since 1970 as if UTC),
 * SQL Server's way: a repeated hour (fall-back) takes the pre-change offset,
 * a skipped hour (spring-forward) too. */
int sim_tz_offset_for_local(const sim_tz *z, int64_t local_s);
/* Frees the cache (tests / shutdown). */
void sim_tz_shutdown(void);
/* Reference count of cache users (servers): the last release frees it. */
void sim_tz_retain(void);
void sim_tz_release(void);

#endif
