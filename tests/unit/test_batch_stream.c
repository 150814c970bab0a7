/* The Arrow C stream over a push-style producer (mcdc_batch_stream.h):
 * every batch in order then the end; a producer's error after some
 * batches; release before, during and after the read, with the producer
 * blocked on a full queue; arrays that outlive their stream; a batch of
 * another shape. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_batch_stream.h"
#include "mcdc_test.h"

typedef struct outcome {
    int produced;   /* batches the sink accepted */
    int last_rc;    /* what the sink said last */
    int freed;      /* ctx_free ran */
} outcome;

typedef struct fake {
    mcdc_schema *schema;
    int batches;    /* how many to produce */
    int rows;       /* per batch */
    int fail_after; /* >= 0: fail with MCDC_E_DATALOSS after this many */
    bool silent;    /* fail without a message */
    mcdc_schema *other; /* non-NULL: the second batch has this schema */
    outcome *out;
} fake;

static mcdc_schema *int_schema(const char *name) {
    mcdc_schema *s = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_schema_create(&s, 1, &e);
    mcdc_schema_set(s, 0, name, MCDC_TYPE_INT32, 0, 0, 0, true, &e);
    return s;
}

static int produce(void *ctx, mcdc_batch_stream_sink_fn sink, void *sink_ctx, mcdc_error *err) {
    fake *f = ctx;
    for (int k = 0; k < f->batches; k++) {
        if (k == f->fail_after) {
            if (f->silent) return MCDC_E_IO;
            return mcdc_error_set(err, MCDC_E_DATALOSS, "changes from 0x01 on were purged");
        }
        mcdc_batch *b = NULL;
        mcdc_schema *s = f->other && k == 1 ? f->other : f->schema;
        if (mcdc_batch_create(&b, s, f->rows, err)) return err->code;
        for (int r = 0; r < f->rows; r++) {
            if (r % 5 == 4) mcdc_col_append_null(&b->columns[0], err);
            else mcdc_col_append_int(&b->columns[0], k * 1000 + r, err);
        }
        mcdc_batch_seal(b, err);
        int rc = sink(sink_ctx, b, err);
        f->out->last_rc = rc;
        if (rc) return rc;
        f->out->produced++;
    }
    return MCDC_OK;
}

static void fake_free(void *ctx) {
    fake *f = ctx;
    f->out->freed++;
    mcdc_schema_unref(f->schema);
    mcdc_schema_unref(f->other);
    mcdc_free(f);
}

static fake *new_fake(int batches, int rows, int fail_after, outcome *out) {
    fake *f = mcdc_calloc(1, sizeof *f);
    f->schema = int_schema("v");
    f->batches = batches;
    f->rows = rows;
    f->fail_after = fail_after;
    f->out = out;
    return f;
}

static int start_fake(struct ArrowArrayStream *st, fake *f, int queue) {
    mcdc_batch_stream_cfg cfg = {f->schema, produce, f, fake_free, queue};
    return mcdc_batch_stream_start(st, &cfg, NULL);
}

static int start(struct ArrowArrayStream *st, int batches, int rows, int fail_after,
                 outcome *out, int queue) {
    return start_fake(st, new_fake(batches, rows, fail_after, out), queue);
}

static int32_t value_at(const struct ArrowArray *a, int64_t r) {
    const struct ArrowArray *c = a->children[0];
    int32_t v;
    memcpy(&v, (const uint8_t *)c->buffers[1] + 4 * r, 4);
    return v;
}

static bool valid_at(const struct ArrowArray *a, int64_t r) {
    const uint8_t *bits = a->children[0]->buffers[0];
    return bits == NULL || ((bits[r >> 3] >> (r & 7)) & 1);
}

TEST(batch_stream_delivers_every_batch_in_order_then_the_end) {
    struct ArrowArrayStream st;
    outcome out = {0, 0, 0};
    CHECK_EQ_INT(start(&st, 7, 10, -1, &out, 2), MCDC_OK);
    struct ArrowSchema sc;
    CHECK_EQ_INT(st.get_schema(&st, &sc), 0);
    CHECK_EQ_STR(sc.format, "+s");
    CHECK_EQ_INT(sc.n_children, 1);
    CHECK_EQ_STR(sc.children[0]->format, "i");
    CHECK_EQ_STR(sc.children[0]->name, "v");
    sc.release(&sc);
    int got = 0;
    bool in_order = true;
    for (;;) {
        struct ArrowArray a;
        CHECK_EQ_INT(st.get_next(&st, &a), 0);
        if (a.release == NULL) break;
        CHECK_EQ_INT(a.length, 10);
        CHECK_EQ_INT(a.children[0]->null_count, 2);
        for (int64_t r = 0; r < a.length; r++)
            if (valid_at(&a, r) != (r % 5 != 4) || (valid_at(&a, r) && value_at(&a, r) != got * 1000 + r))
                in_order = false;
        a.release(&a);
        got++;
    }
    CHECK(in_order);
    CHECK_EQ_INT(got, 7);
    /* The end is sticky, and no error is reported. */
    struct ArrowArray a;
    CHECK_EQ_INT(st.get_next(&st, &a), 0);
    CHECK(a.release == NULL);
    CHECK(st.get_last_error(&st) == NULL);
    st.release(&st);
    CHECK(st.release == NULL);
    CHECK_EQ_INT(out.freed, 1);
    CHECK_EQ_INT(out.produced, 7);
}

TEST(batch_stream_error_after_batches_reaches_get_next_and_last_error) {
    struct ArrowArrayStream st;
    outcome out = {0, 0, 0};
    CHECK_EQ_INT(start(&st, 10, 3, 2, &out, 1), MCDC_OK);
    struct ArrowArray a;
    for (int k = 0; k < 2; k++) {
        CHECK_EQ_INT(st.get_next(&st, &a), 0);
        CHECK(a.release != NULL);
        if (a.release) a.release(&a);
    }
    CHECK_EQ_INT(st.get_next(&st, &a), EIO);
    const char *m = st.get_last_error(&st);
    CHECK(m != NULL && strcmp(m, "DataLossError: changes from 0x01 on were purged") == 0);
    /* The error stays. */
    CHECK_EQ_INT(st.get_next(&st, &a), EIO);
    CHECK(st.get_last_error(&st) != NULL);
    st.release(&st);
    CHECK_EQ_INT(out.freed, 1);
}

TEST(batch_stream_silent_producer_failure_still_explains) {
    struct ArrowArrayStream st;
    outcome out = {0, 0, 0};
    fake *f = new_fake(3, 1, 0, &out);
    f->silent = true;
    CHECK_EQ_INT(start_fake(&st, f, 1), MCDC_OK);
    struct ArrowArray a;
    CHECK_EQ_INT(st.get_next(&st, &a), EIO);
    const char *m = st.get_last_error(&st);
    CHECK(m != NULL && strstr(m, "without saying why") != NULL);
    st.release(&st);
    CHECK_EQ_INT(out.freed, 1);
}

TEST(batch_stream_release_mid_stream_stops_a_blocked_producer) {
    struct ArrowArrayStream st;
    outcome out = {0, 0, 0};
    /* 1000 batches, a queue of 2: the producer blocks on the full queue. */
    CHECK_EQ_INT(start(&st, 1000, 100, -1, &out, 2), MCDC_OK);
    struct ArrowArray a;
    CHECK_EQ_INT(st.get_next(&st, &a), 0);
    CHECK(a.release != NULL);
    st.release(&st); /* joins: returns only once the producer stopped */
    CHECK(st.release == NULL);
    CHECK_EQ_INT(out.freed, 1);
    CHECK_EQ_INT(out.last_rc, MCDC_E_CANCELLED);
    CHECK(out.produced >= 1 && out.produced <= 4);
    /* The batch taken before the release is still whole. */
    CHECK_EQ_INT(a.length, 100);
    CHECK_EQ_INT(value_at(&a, 3), 3);
    a.release(&a);
}

TEST(batch_stream_release_before_reading) {
    struct ArrowArrayStream st;
    outcome out = {0, 0, 0};
    CHECK_EQ_INT(start(&st, 50, 10, -1, &out, 1), MCDC_OK);
    st.release(&st);
    CHECK_EQ_INT(out.freed, 1);
    CHECK(out.last_rc == MCDC_E_CANCELLED || out.produced <= 1);
    CHECK(st.release == NULL); /* marked released, as the C stream interface asks */
    CHECK_EQ_INT(out.freed, 1);
}

TEST(batch_stream_batch_of_another_shape_is_an_error) {
    struct ArrowArrayStream st;
    outcome out = {0, 0, 0};
    fake *f = new_fake(3, 2, -1, &out);
    f->other = int_schema("w"); /* same type, another name */
    CHECK_EQ_INT(start_fake(&st, f, 2), MCDC_OK);
    struct ArrowArray a;
    CHECK_EQ_INT(st.get_next(&st, &a), 0);
    if (a.release) a.release(&a);
    CHECK_EQ_INT(st.get_next(&st, &a), EIO);
    const char *m = st.get_last_error(&st);
    CHECK(m != NULL && strstr(m, "SchemaChangedError") != NULL);
    st.release(&st);
    CHECK_EQ_INT(out.last_rc, MCDC_E_SCHEMA);
}

TEST(batch_stream_errno_values) {
    CHECK_EQ_INT(mcdc_batch_stream_errno(MCDC_OK), 0);
    CHECK_EQ_INT(mcdc_batch_stream_errno(MCDC_E_INVALID), EINVAL);
    CHECK_EQ_INT(mcdc_batch_stream_errno(MCDC_E_NOMEM), ENOMEM);
    CHECK_EQ_INT(mcdc_batch_stream_errno(MCDC_E_CANCELLED), ECANCELED);
    CHECK_EQ_INT(mcdc_batch_stream_errno(MCDC_E_DATALOSS), EIO);
    CHECK_EQ_INT(mcdc_batch_stream_errno(MCDC_E_TRANSIENT), EIO);
}
