/*
 * mcdc_options.h - the stream's source options, with the reference library's
 * names (captureInstance, connectionString, maxCommitsPerBatch...).
 *
 * The public part (create, set, load_file, get, check_required, known
 * names) is declared in include/mssqlcdc.h. Names are matched ignoring case;
 * values are validated when set, so a bad value fails at once with a message
 * naming the option. An unknown name is kept and warned about (as the
 * reference does): a typo must not silently change behaviour, nor stop a job
 * that runs.
 */
#ifndef MCDC_OPTIONS_H
#define MCDC_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "mcdc_util.h"

bool mcdc_opts_is_set(const mcdc_opts *o, const char *name);
/* Typed getters for validated options (values were checked by set). */
bool mcdc_opts_get_bool(const mcdc_opts *o, const char *name);
/* -1 when unset and without a default (maxCommitsPerBatch: unlimited), or
 * "auto". */
int64_t mcdc_opts_get_int(const mcdc_opts *o, const char *name);

/* Calls fn for each option that was set, in the order set; values of secret
 * options (connectionString) are given redacted. */
void mcdc_opts_each(const mcdc_opts *o, void (*fn)(void *ctx, const char *name, const char *value),
                    void *ctx);
/* A copy of o (its unknown names too, without warning again). Caller frees
 * it with mcdc_opts_free. */
int mcdc_opts_clone(mcdc_opts **out, const mcdc_opts *o, mcdc_error *err);
/* Unknown option names seen by set, comma-separated; borrowed, "" if none. */
const char *mcdc_opts_unknown(const mcdc_opts *o);

/* The one check of a capture instance name, for the option and for every
 * name the engine puts in T-SQL (cdc.[<name>_CT]...): 1-100 characters
 * (UTF-8), without ']' and without control characters. NULL is empty. */
int mcdc_validate_capture_instance(const char *name, mcdc_error *err);

#endif /* MCDC_OPTIONS_H */
