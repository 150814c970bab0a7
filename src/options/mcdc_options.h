/*
 * mcdc_options.h - the stream's source options, with the reference library's
 * names (captureInstance, connectionString, maxCommitsPerBatch...).
 *
 * Names are matched ignoring case; values are strings and are validated when
 * set, so a bad value fails at once with a message naming the option. An
 * unknown name is kept and warned about once (as the reference does): a typo
 * must not silently change behaviour, nor stop a job that runs.
 */
#ifndef MCDC_OPTIONS_H
#define MCDC_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "mcdc_util.h"

typedef struct mcdc_opts mcdc_opts;

int mcdc_opts_create(mcdc_opts **out, mcdc_error *err);
void mcdc_opts_free(mcdc_opts *o);

/* Validates and stores. Known names are stored under their canonical
 * spelling. Unknown names are stored and logged as a warning; *unknown (may
 * be NULL) tells the caller. A value that does not validate is MCDC_E_INVALID
 * with the reason; the previous value stays. Secrets are never echoed. */
int mcdc_opts_set(mcdc_opts *o, const char *name, const char *value, bool *unknown,
                  mcdc_error *err);
/* Reads "name = value" lines ('#' comments, blank lines) from a file. Errors
 * name the file and line. */
int mcdc_opts_load_file(mcdc_opts *o, const char *path, mcdc_error *err);

/* The value as set, or the default, or NULL (no default). Borrowed. */
const char *mcdc_opts_get(const mcdc_opts *o, const char *name);
bool mcdc_opts_is_set(const mcdc_opts *o, const char *name);
/* Typed getters for validated options (values were checked by set). */
bool mcdc_opts_get_bool(const mcdc_opts *o, const char *name);
/* -1 when unset and without a default (e.g. maxCommitsPerBatch: unlimited). */
int64_t mcdc_opts_get_int(const mcdc_opts *o, const char *name);

/* Checks required options are present (captureInstance, connectionString).
 * The message lists every missing one. */
int mcdc_opts_check_required(const mcdc_opts *o, mcdc_error *err);

/* Calls fn for each option that was set, in the order set; values of secret
 * options (connectionString) are given redacted. */
void mcdc_opts_each(const mcdc_opts *o, void (*fn)(void *ctx, const char *name, const char *value),
                    void *ctx);
/* Unknown option names seen by set, comma-separated; borrowed, "" if none. */
const char *mcdc_opts_unknown(const mcdc_opts *o);

/* Names of every known option, NULL-terminated (for --help and docs tests). */
const char *const *mcdc_opts_known_names(void);

/* Validation shared with the rest of the engine: a capture instance name is
 * 1-100 characters, without ']' and without control characters. */
int mcdc_validate_capture_instance(const char *name, mcdc_error *err);

#endif /* MCDC_OPTIONS_H */
