/*
 * mcdc_finalization.h - finalized_until: which periods of a table are
 * complete (reference §2.9). Data first, verdict after, never backwards.
 */
#ifndef MCDC_FINALIZATION_H
#define MCDC_FINALIZATION_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "mcdc_util.h"

/* The granularity, the verdict and their functions are public: see
 * include/mssqlcdc.h. */

#endif /* MCDC_FINALIZATION_H */
