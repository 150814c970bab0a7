/*
 * mcdc_fanin.h - many producer threads, one consumer: the readers of a
 * unit's ranges hand batches through a bounded queue to the thread that
 * writes them (Parquet encoding and compression happen there, off the
 * reading threads).
 *
 * Ownership: every batch put is owned by the queue until the consumer takes
 * it with mcdc_fanin_next (then it is the consumer's). After
 * mcdc_fanin_fail, producers' puts free their batch and return
 * MCDC_E_CANCELLED, so they stop soon. Producers log to the sink of the
 * thread that started them.
 */
#ifndef MCDC_FANIN_H
#define MCDC_FANIN_H

#include "mcdc_batch.h"

/* One producer: runs on its own thread, hands batches to put(put_ctx, b). */
typedef int (*mcdc_fanin_producer)(void *arg, mcdc_batch_fn put, void *put_ctx,
                                   mcdc_error *err);

typedef struct mcdc_fanin mcdc_fanin;

/* Starts n producers, producer(args[i]) each, whose puts wait while depth
 * batches (1 .. MCDC_QUEUE_DEPTH_MAX) are queued. An error still gives *out
 * (to finish). */
int mcdc_fanin_start(mcdc_fanin **out, int n, int depth, mcdc_fanin_producer producer,
                     void *const *args, mcdc_error *err);
/* The next batch (owned by the caller), NULL once every producer is done and
 * the queue is empty. */
mcdc_batch *mcdc_fanin_next(mcdc_fanin *f);
/* The same, and *from: which producer put it (its index in args). */
mcdc_batch *mcdc_fanin_next_from(mcdc_fanin *f, int *from);
/* The consumer failed: producers are told to stop. */
void mcdc_fanin_fail(mcdc_fanin *f);
/* Joins every producer and frees f (NULL-safe). The result is the first
 * producer error other than MCDC_E_CANCELLED, else the first one, else OK.
 * *producer_rc (n entries, may be NULL) gets each producer's status. */
int mcdc_fanin_finish(mcdc_fanin *f, int *producer_rc, mcdc_error *err);

#endif /* MCDC_FANIN_H */
