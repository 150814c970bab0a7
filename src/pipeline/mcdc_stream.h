/*
 * mcdc_stream.h - the micro-batch stream: CDC changes of one capture
 * instance into a bronze Delta table, exactly once, with a facts row per
 * batch and the finalization verdict advanced after each committed batch.
 * It is one job on the frame (mcdc_frame.h), which holds the protocol; the
 * handle's functions are public (include/mssqlcdc.h: mcdc_stream_create,
 * _run, _request_stop, _free).
 */
#ifndef MCDC_STREAM_H
#define MCDC_STREAM_H

#include "mcdc_context.h"
#include "mcdc_finalization.h"
#include "mcdc_options.h"

#endif /* MCDC_STREAM_H */
