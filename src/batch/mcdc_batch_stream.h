/*
 * mcdc_batch_stream.h - batches from a push-style producer as a pull-style
 * Arrow C stream (struct ArrowArrayStream).
 *
 * The engine's readers push: they call a sink with each sealed batch. An
 * Arrow consumer pulls: get_next. The stream runs the producer on a thread
 * of its own and hands batches over through a bounded queue:
 *
 *   producer thread --sink--> [queue of up to queue_batches] --get_next--> consumer
 *
 * The sink blocks while the queue is full; get_next blocks while it is
 * empty. The producer's status ends the stream: MCDC_OK is the end of the
 * stream, anything else is get_next's error (errno value) with
 * get_last_error "<ErrorKind>: <message>". release may come at any time: it
 * makes the sink refuse (MCDC_E_CANCELLED), so a producer that honours its
 * sink's status returns, and joins the thread. Batches already taken by
 * get_next are ArrowArrays of their own and outlive the stream.
 */
#ifndef MCDC_BATCH_STREAM_H
#define MCDC_BATCH_STREAM_H

#include "mcdc_batch.h"

/* Takes b (also on error). Non-zero: the producer must stop and return it. */
typedef int (*mcdc_batch_stream_sink_fn)(void *sink_ctx, mcdc_batch *b, mcdc_error *err);
/* Runs on the stream's thread; returns its final status (err filled on
 * failure). */
typedef int (*mcdc_batch_produce_fn)(void *ctx, mcdc_batch_stream_sink_fn sink, void *sink_ctx,
                                     mcdc_error *err);

typedef struct mcdc_batch_stream_cfg {
    mcdc_schema *schema;           /* every batch's schema; the stream takes a reference */
    mcdc_batch_produce_fn produce;
    void *ctx;                     /* the producer's; owned by the stream */
    void (*ctx_free)(void *ctx);   /* frees ctx once the thread is joined; may be NULL */
    int queue_batches;             /* 1 .. MCDC_QUEUE_DEPTH_MAX */
} mcdc_batch_stream_cfg;

/* Fills *out and starts the producer. ctx passes to the stream whatever this
 * returns (on failure ctx_free runs before the return, and out->release is
 * NULL). */
int mcdc_batch_stream_start(struct ArrowArrayStream *out, const mcdc_batch_stream_cfg *cfg,
                            mcdc_error *err);

/* The errno value get_next returns for a producer status: EINVAL, ENOMEM,
 * ECANCELED, else EIO. */
int mcdc_batch_stream_errno(int status);

#endif /* MCDC_BATCH_STREAM_H */
