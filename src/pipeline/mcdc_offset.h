/*
 * mcdc_offset.h - a stream position as JSON, the reference's Offset
 * {"lsn": "0x...", "commit_ts": "YYYY-MM-DDTHH:MM:SS.fff" or ""}: in
 * checkpoints, the generation state file and what the snapshot commands
 * print.
 */
#ifndef MCDC_OFFSET_H
#define MCDC_OFFSET_H

#include <jansson.h>

#include "mssqlcdc.h"
#include "mcdc_util.h"

/* NULL when out of memory. */
json_t *mcdc_offset_json(const mcdc_offset *o);
/* MCDC_E_CORRUPT when j is not an offset (what says where is the caller's). */
int mcdc_offset_parse(mcdc_offset *o, const json_t *j, mcdc_error *err);
/* The commit_ts text ("" when none); out of at least 32 bytes. */
void mcdc_offset_commit_text(const mcdc_offset *o, char out[32]);

#endif /* MCDC_OFFSET_H */
