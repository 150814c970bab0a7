/* mcdc_offset.c - positions as JSON (see mcdc_offset.h). */
#include "mcdc_offset.h"

#include <stdio.h>
#include <string.h>

#include "mcdc_lsn.h"

void mcdc_offset_commit_text(const mcdc_offset *o, char out[32]) {
    out[0] = 0;
    if (o->has_commit_ts) mcdc_format_ts_us(o->commit_us, 3, out);
}

json_t *mcdc_offset_json(const mcdc_offset *o) {
    char ts[32];
    mcdc_offset_commit_text(o, ts);
    return json_pack("{s:s, s:s}", "lsn", o->lsn, "commit_ts", ts);
}

int mcdc_offset_parse(mcdc_offset *o, const json_t *j, mcdc_error *err) {
    memset(o, 0, sizeof *o);
    const char *lsn = json_string_value(json_object_get(j, "lsn"));
    const char *ts = json_string_value(json_object_get(j, "commit_ts"));
    if (lsn == NULL || ts == NULL)
        return mcdc_error_set(err, MCDC_E_CORRUPT, "an offset lacks \"lsn\" or \"commit_ts\"");
    mcdc_lsn l;
    if (mcdc_lsn_parse_cstr(&l, lsn, err)) return MCDC_E_CORRUPT;
    mcdc_lsn_format(&l, o->lsn);
    o->has_commit_ts = *ts != 0;
    if (o->has_commit_ts && mcdc_parse_ts_us(ts, strlen(ts), &o->commit_us, err))
        return MCDC_E_CORRUPT;
    return MCDC_OK;
}
