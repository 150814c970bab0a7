/* mcdc_batch_stream.c - a push-style batch producer behind an Arrow C stream
 * (mcdc_batch_stream.h). */
#include "mcdc_batch_stream.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

typedef struct bstream {
    mcdc_schema *schema;
    mcdc_batch_produce_fn produce;
    void *ctx;
    void (*ctx_free)(void *ctx);
    pthread_t thread;
    /* Guarded by mu: */
    pthread_mutex_t mu;
    pthread_cond_t can_take; /* a batch was queued, or the producer finished */
    pthread_cond_t can_put;  /* room in the queue, or the consumer released */
    mcdc_batch **queue;      /* ring of cap entries */
    int cap, head, count;
    bool finished;           /* the producer returned: status and err are final */
    bool released;           /* the consumer is gone: the sink refuses */
    int status;
    mcdc_error err;
    /* Consumer side only: */
    bool failed;             /* the last callback failed; last_error says why */
    char last_error[MCDC_ERROR_MESSAGE_MAX + 64];
} bstream;

int mcdc_batch_stream_errno(int status) {
    switch (status) {
    case MCDC_OK: return 0;
    case MCDC_E_INVALID: return EINVAL;
    case MCDC_E_NOMEM: return ENOMEM;
    case MCDC_E_CANCELLED: return ECANCELED;
    default: return EIO;
    }
}

static bool same_fields(const mcdc_schema *a, const mcdc_schema *b) {
    if (a == b) return true;
    if (a->n_fields != b->n_fields) return false;
    for (int32_t i = 0; i < a->n_fields; i++) {
        const mcdc_field *x = &a->fields[i], *y = &b->fields[i];
        if (x->type != y->type || x->precision != y->precision || x->scale != y->scale ||
            x->byte_width != y->byte_width || x->nullable != y->nullable ||
            strcmp(x->name, y->name) != 0)
            return false;
    }
    return true;
}

/* The producer's sink: queues b, waiting for room; refuses once released. */
static int sink(void *vs, mcdc_batch *b, mcdc_error *err) {
    bstream *s = vs;
    MCDC_ASSERT(b != NULL && b->schema != NULL);
    /* The batch entering the stream has the shape get_schema announced. */
    if (!same_fields(b->schema, s->schema)) {
        mcdc_batch_free(b);
        return mcdc_error_set(err, MCDC_E_SCHEMA,
                              "a batch's columns differ from the stream's schema");
    }
    pthread_mutex_lock(&s->mu);
    while (s->count == s->cap && !s->released) pthread_cond_wait(&s->can_put, &s->mu);
    if (s->released) {
        pthread_mutex_unlock(&s->mu);
        mcdc_batch_free(b);
        return mcdc_error_set(err, MCDC_E_CANCELLED,
                              "the Arrow stream was released before its end");
    }
    s->queue[(s->head + s->count) % s->cap] = b;
    s->count++;
    pthread_cond_signal(&s->can_take);
    pthread_mutex_unlock(&s->mu);
    return MCDC_OK;
}

static void *run(void *vs) {
    bstream *s = vs;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = s->produce(s->ctx, sink, s, &e);
    if (rc != MCDC_OK && e.code == MCDC_OK)
        mcdc_error_set(&e, rc, "the batch producer failed without saying why");
    pthread_mutex_lock(&s->mu);
    s->status = rc;
    s->err = e;
    s->finished = true;
    pthread_cond_broadcast(&s->can_take);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static int fail(bstream *s, int status, const char *message) {
    s->failed = true;
    snprintf(s->last_error, sizeof s->last_error, "%s: %s", mcdc_status_kind(status), message);
    return mcdc_batch_stream_errno(status);
}

static int get_schema(struct ArrowArrayStream *st, struct ArrowSchema *out) {
    bstream *s = st->private_data;
    mcdc_error e = MCDC_ERROR_INIT;
    s->failed = false;
    if (mcdc_schema_export(s->schema, out, &e) != MCDC_OK) return fail(s, e.code, e.message);
    return 0;
}

static int get_next(struct ArrowArrayStream *st, struct ArrowArray *out) {
    bstream *s = st->private_data;
    s->failed = false;
    pthread_mutex_lock(&s->mu);
    while (s->count == 0 && !s->finished) pthread_cond_wait(&s->can_take, &s->mu);
    mcdc_batch *b = NULL;
    if (s->count > 0) {
        b = s->queue[s->head];
        s->queue[s->head] = NULL;
        s->head = (s->head + 1) % s->cap;
        s->count--;
        pthread_cond_signal(&s->can_put);
    }
    int status = s->status;
    mcdc_error e = s->err;
    pthread_mutex_unlock(&s->mu);
    if (b == NULL) { /* finished and drained */
        if (status != MCDC_OK) return fail(s, status, e.message);
        memset(out, 0, sizeof *out); /* release == NULL: the end of the stream */
        return 0;
    }
    /* The batch leaving: exported whole (the export validates it), its
     * schema dropped; the ArrowArray owns the buffers from here. */
    struct ArrowSchema schema;
    mcdc_error xe = MCDC_ERROR_INIT;
    if (mcdc_batch_export(&b, out, &schema, &xe) != MCDC_OK) {
        mcdc_batch_free(b);
        return fail(s, xe.code, xe.message);
    }
    schema.release(&schema);
    MCDC_ASSERT(out->release != NULL && out->n_children == s->schema->n_fields);
    return 0;
}

static const char *get_last_error(struct ArrowArrayStream *st) {
    bstream *s = st->private_data;
    return s->failed ? s->last_error : NULL;
}

static void bstream_free(bstream *s) {
    for (int i = 0; i < s->count; i++) mcdc_batch_free(s->queue[(s->head + i) % s->cap]);
    if (s->ctx_free) s->ctx_free(s->ctx);
    mcdc_schema_unref(s->schema);
    pthread_cond_destroy(&s->can_put);
    pthread_cond_destroy(&s->can_take);
    pthread_mutex_destroy(&s->mu);
    mcdc_free(s->queue);
    mcdc_free(s);
}

static void release(struct ArrowArrayStream *st) {
    if (st == NULL || st->release == NULL) return;
    bstream *s = st->private_data;
    pthread_mutex_lock(&s->mu);
    s->released = true;
    pthread_cond_broadcast(&s->can_put);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    MCDC_ASSERT(s->finished);
    bstream_free(s);
    st->release = NULL;
    st->private_data = NULL;
}

int mcdc_batch_stream_start(struct ArrowArrayStream *out, const mcdc_batch_stream_cfg *cfg,
                            mcdc_error *err) {
    MCDC_ASSERT(out != NULL && cfg != NULL && cfg->schema != NULL && cfg->produce != NULL);
    MCDC_ASSERT(cfg->queue_batches >= 1 && cfg->queue_batches <= MCDC_QUEUE_DEPTH_MAX);
    memset(out, 0, sizeof *out);
    bstream *s = mcdc_calloc(1, sizeof *s);
    mcdc_batch **q = mcdc_calloc((size_t)cfg->queue_batches, sizeof *q);
    if (s == NULL || q == NULL) {
        mcdc_free(s);
        mcdc_free(q);
        if (cfg->ctx_free) cfg->ctx_free(cfg->ctx);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory starting an Arrow stream");
    }
    s->schema = mcdc_schema_ref(cfg->schema);
    s->produce = cfg->produce;
    s->ctx = cfg->ctx;
    s->ctx_free = cfg->ctx_free;
    s->queue = q;
    s->cap = cfg->queue_batches;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->can_take, NULL);
    pthread_cond_init(&s->can_put, NULL);
    /* The thread takes no signal: the host's handlers keep running on the
     * host's threads (a Python or JVM host relies on that). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int prc = mcdc_thread_start(&s->thread, run, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (prc != 0) {
        s->count = 0;
        bstream_free(s);
        return mcdc_error_set(err, MCDC_E_NOMEM, "cannot start the Arrow stream's thread: %s",
                              strerror(prc));
    }
    *out = (struct ArrowArrayStream){.get_schema = get_schema,
                                     .get_next = get_next,
                                     .get_last_error = get_last_error,
                                     .release = release,
                                     .private_data = s};
    return MCDC_OK;
}
