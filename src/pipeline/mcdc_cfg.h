/*
 * mcdc_cfg.h - the public configs by version, and the one copy every job's
 * create makes of the caller's.
 *
 * A caller built against an older header passes a struct that ends where its
 * version ends. A job reads exactly those bytes and takes the defaults (the
 * _INIT macro's values) for the fields later versions added, so that no byte
 * past the caller's struct is read and the job sees one layout, the newest.
 * The bytes each version of each config holds are in one table
 * (mcdc_cfg.c); the public mcdc_*_cfg_init functions write a version's
 * defaults from it.
 */
#ifndef MCDC_CFG_H
#define MCDC_CFG_H

#include <stddef.h>

#include "mcdc_util.h"

typedef enum mcdc_cfg_kind {
    MCDC_CFG_STREAM = 0,
    MCDC_CFG_SNAPSHOT,
    MCDC_CFG_SEED,
    MCDC_CFG_BACKFILL,
    MCDC_CFG_APPLY,
    MCDC_CFG_RECONCILE,
    MCDC_CFG_REPAIR,
    MCDC_CFG_RUNTIME,
    MCDC_CFG_KINDS
} mcdc_cfg_kind;

/* Copies cfg (the caller's struct of kind, of its version) into *out (a
 * struct of kind in the newest layout, out_size bytes): the bytes cfg's
 * version holds, the defaults after them. out->version stays the caller's
 * (what a job fills back for it depends on it). A version the library does
 * not know, or a reserved slot that is not zero, is MCDC_E_INVALID. */
int mcdc_cfg_copy(void *out, size_t out_size, mcdc_cfg_kind kind, const void *cfg,
                  mcdc_error *err);

/* The bytes version of kind holds; 0 when the library knows no such version. */
size_t mcdc_cfg_version_bytes(mcdc_cfg_kind kind, int version);

/* The public results a caller hands a job, which carry their size (their
 * first field, size_t size: "Results" in mssqlcdc.h). The library fills its
 * own struct of the newest layout and copies the bytes the caller's holds;
 * a call reading a caller's result reads those bytes into one of the
 * newest layout. */
typedef enum mcdc_result_kind {
    MCDC_RESULT_APPLY = 0,
    MCDC_RESULT_BACKFILL,
    MCDC_RESULT_RECONCILE,
    MCDC_RESULT_REPAIR,
    MCDC_RESULT_KINDS
} mcdc_result_kind;

/* Checks the size the caller set in its result of kind: at least the bytes
 * of the first sized version, else MCDC_E_INVALID (what names the call).
 * Before the job does anything. */
int mcdc_result_check(mcdc_result_kind kind, const void *caller, const char *what,
                      mcdc_error *err);
/* Writes the library's result of kind (the newest layout) into the
 * caller's, whose size mcdc_result_check accepted: the bytes its size holds
 * after the size field, which stays as the caller set it. */
void mcdc_result_out(mcdc_result_kind kind, void *caller, const void *full);
/* Reads the caller's result of kind into *full (the newest layout): the
 * bytes its size holds, zero after them, full's size the newest's. A size
 * mcdc_result_check refuses is its error. */
int mcdc_result_in(mcdc_result_kind kind, void *full, const void *caller, const char *what,
                   mcdc_error *err);

#endif /* MCDC_CFG_H */
