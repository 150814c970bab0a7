/* test_batch_pool.c - freed batches' buffers are reused by the schema's next
 * batches: a reused batch is as empty as a fresh one and fills identically;
 * the pool is bounded and dies with the schema. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "mcdc_batch.h"
#include "mcdc_test.h"

static mcdc_schema *pool_schema(void) {
    mcdc_schema *s = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    if (mcdc_schema_create(&s, 4, &e)) return NULL;
    mcdc_schema_set(s, 0, "t", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 1, "i", MCDC_TYPE_INT32, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 2, "b", MCDC_TYPE_BOOL, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 3, "d", MCDC_TYPE_DECIMAL, 18, 4, 0, true, &e);
    return s;
}

/* Rows whose content depends on seed (NULLs in different places). */
static void pool_fill(mcdc_batch *b, int rows, int seed) {
    mcdc_error e = MCDC_ERROR_INIT;
    for (int r = 0; r < rows; r++) {
        char t[64];
        int n = snprintf(t, sizeof t, "row %d seed %d %.*s", r, seed, (r * 7 + seed) % 30,
                         "abcdefghijklmnopqrstuvwxyz0123456789");
        if ((r + seed) % 5 == 0)
            mcdc_col_append_null(&b->columns[0], &e);
        else
            mcdc_col_append_bytes(&b->columns[0], t, n, &e);
        if ((r + seed) % 7 == 0)
            mcdc_col_append_null(&b->columns[1], &e);
        else
            mcdc_col_append_int(&b->columns[1], r * 31 + seed, &e);
        if ((r + seed) % 3 == 0)
            mcdc_col_append_null(&b->columns[2], &e);
        else
            mcdc_col_append_bool(&b->columns[2], (r ^ seed) & 1, &e);
        mcdc_col_append_decimal(&b->columns[3], (uint64_t)(r * seed), 0, &e);
    }
}

/* Every value and validity bit of two sealed batches equal. */
static bool same_batch(const mcdc_batch *a, const mcdc_batch *b) {
    if (a->rows != b->rows) return false;
    for (int32_t c = 0; c < a->schema->n_fields; c++) {
        const mcdc_column *x = &a->columns[c], *y = &b->columns[c];
        if (x->length != y->length || x->null_count != y->null_count) return false;
        for (int64_t r = 0; r < x->length; r++) {
            bool vx = x->validity == NULL || (x->validity[r >> 3] >> (r & 7)) & 1;
            bool vy = y->validity == NULL || (y->validity[r >> 3] >> (r & 7)) & 1;
            if (vx != vy) return false;
            if (!vx) continue;
            switch (x->field->type) {
            case MCDC_TYPE_UTF8: {
                int32_t lx = x->offsets[r + 1] - x->offsets[r];
                int32_t ly = y->offsets[r + 1] - y->offsets[r];
                if (lx != ly || memcmp(x->data + x->offsets[r], y->data + y->offsets[r],
                                       (size_t)lx) != 0)
                    return false;
                break;
            }
            case MCDC_TYPE_BOOL:
                if (((x->values[r >> 3] >> (r & 7)) & 1) != ((y->values[r >> 3] >> (r & 7)) & 1))
                    return false;
                break;
            case MCDC_TYPE_INT32:
                if (memcmp(x->values + r * 4, y->values + r * 4, 4) != 0) return false;
                break;
            default:
                if (memcmp(x->values + r * 16, y->values + r * 16, 16) != 0) return false;
                break;
            }
        }
    }
    return true;
}

/* b filled with rows rows of seed: valid, and equal to a fresh batch of a
 * schema of its own filled alike. */
static bool fills_as_fresh(mcdc_batch *b, int rows, int seed) {
    mcdc_error e = MCDC_ERROR_INIT;
    pool_fill(b, rows, seed);
    if (mcdc_batch_seal(b, &e) != MCDC_OK || mcdc_batch_validate(b, &e) != MCDC_OK) return false;
    mcdc_schema *s2 = pool_schema();
    mcdc_batch *fresh = NULL;
    bool same = s2 && mcdc_batch_create(&fresh, s2, 100, &e) == MCDC_OK;
    if (same) {
        pool_fill(fresh, rows, seed);
        same = mcdc_batch_seal(fresh, &e) == MCDC_OK && same_batch(b, fresh);
    }
    mcdc_batch_free(fresh);
    mcdc_schema_unref(s2);
    return same;
}

TEST(batch_pool_reuses_buffers_and_starts_empty) {
    mcdc_schema *s = pool_schema();
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_batch *a = NULL, *b = NULL;
    CHECK_EQ_INT(mcdc_batch_create(&a, s, 100, &e), MCDC_OK);
    pool_fill(a, 900, 1); /* grows past the capacity: text and rows */
    CHECK_EQ_INT(mcdc_batch_seal(a, &e), MCDC_OK);
    const uint8_t *data = a->columns[0].data;
    int64_t cap = a->columns[1].capacity, data_cap = a->columns[0].data_cap;
    mcdc_batch_free(a);
    CHECK(s->pool != NULL);

    CHECK_EQ_INT(mcdc_batch_create(&b, s, 100, &e), MCDC_OK);
    CHECK(b->columns[0].data == data); /* the same buffers, grown sizes kept */
    CHECK_EQ_INT(b->columns[1].capacity, cap);
    CHECK_EQ_INT(b->columns[0].data_cap, data_cap);
    for (int32_t c = 0; c < 4; c++) {
        CHECK_EQ_INT(b->columns[c].length, 0);
        CHECK_EQ_INT(b->columns[c].null_count, 0);
        CHECK(b->columns[c].validity == NULL);
    }
    CHECK_EQ_INT(b->columns[0].data_len, 0);
    CHECK_EQ_INT(b->columns[0].offsets[0], 0);
    CHECK_EQ_INT(b->rows, 0);
    /* A second fill with other NULLs and bits gives what a fresh batch gives. */
    CHECK(fills_as_fresh(b, 700, 2));
    mcdc_batch_free(b);
    mcdc_schema_unref(s); /* frees the pooled buffers: the runner checks leaks */
}

TEST(batch_pool_is_bounded_and_takes_exported_batches_back) {
    mcdc_schema *s = pool_schema();
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_batch *b[4] = {0};
    const mcdc_column *cols[4];
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_INT(mcdc_batch_create(&b[i], s, 10, &e), MCDC_OK);
        pool_fill(b[i], 50, i);
        cols[i] = b[i]->columns;
    }
    mcdc_alloc_stats before, after;
    mcdc_alloc_get_stats(&before);
    for (int i = 0; i < 4; i++) mcdc_batch_free(b[i]);
    mcdc_alloc_get_stats(&after);
    CHECK(s->pool != NULL);
    CHECK(after.live_bytes < before.live_bytes); /* two of four kept, the rest freed */
    /* The kept ones come back last in, first out; then fresh columns. */
    mcdc_batch *x = NULL, *y = NULL, *z = NULL;
    CHECK_EQ_INT(mcdc_batch_create(&x, s, 10, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_batch_create(&y, s, 10, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_batch_create(&z, s, 10, &e), MCDC_OK);
    CHECK(x->columns == cols[1]);
    CHECK(y->columns == cols[0]);
    CHECK(z->columns != cols[0] && z->columns != cols[1]);
    mcdc_batch_free(z);
    mcdc_batch_free(y);
    /* An exported batch's columns stay with its arrays (the pool does not
     * get them) until the last array is released, a moved child included. */
    pool_fill(x, 20, 3);
    CHECK_EQ_INT(mcdc_batch_seal(x, &e), MCDC_OK);
    const mcdc_column *xcols = x->columns;
    struct ArrowArray arr, moved;
    struct ArrowSchema as;
    CHECK_EQ_INT(mcdc_batch_export(&x, &arr, &as, &e), MCDC_OK);
    CHECK(x == NULL);
    CHECK(arr.children[0]->buffers[2] == xcols[0].data); /* no copy */
    mcdc_batch *w = NULL, *v = NULL, *u = NULL;
    CHECK_EQ_INT(mcdc_batch_create(&w, s, 10, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_batch_create(&v, s, 10, &e), MCDC_OK);
    CHECK(w->columns == cols[0]); /* y's, freed last */
    CHECK(v->columns != xcols && v->columns != cols[0]); /* z's: the pool is empty now */
    moved = *arr.children[1]; /* a consumer moves a child out */
    arr.children[1]->release = NULL;
    arr.release(&arr);
    CHECK(arr.release == NULL);
    CHECK_EQ_INT(mcdc_batch_create(&u, s, 10, &e), MCDC_OK);
    CHECK(u->columns != xcols); /* the moved child still reads them */
    CHECK_EQ_INT(moved.length, 20);
    mcdc_batch_free(u);
    moved.release(&moved);
    CHECK_EQ_INT(mcdc_batch_create(&u, s, 10, &e), MCDC_OK);
    CHECK(u->columns == xcols); /* back, emptied */
    CHECK_EQ_INT(u->columns[0].length, 0);
    CHECK_EQ_INT(u->columns[0].data_len, 0);
    CHECK(u->columns[1].validity == NULL);
    mcdc_batch_free(u);
    mcdc_batch_free(v);
    mcdc_batch_free(w);
    as.release(&as);
    /* Changing a field drops what was kept for the old type. */
    CHECK_EQ_INT(mcdc_schema_set(s, 1, "i", MCDC_TYPE_INT64, 0, 0, 0, true, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_batch_create(&w, s, 10, &e), MCDC_OK);
    CHECK(w->columns[0].data == NULL && w->columns[0].data_cap == 0); /* fresh columns */
    CHECK_EQ_INT(mcdc_col_append_int(&w->columns[1], INT64_MAX, &e), MCDC_OK);
    mcdc_batch_free(w);
    mcdc_schema_unref(s);
}

/* Batches of one schema created on one thread and freed on another (the
 * reader and its sink): every reused batch starts empty; nothing leaks. */
typedef struct {
    mcdc_schema *s;
    mcdc_batch *handoff[64];
    int bad;
} pool_relay;
#define POOL_STOP ((mcdc_batch *)&pool_stop_mark) /* the producer failed */
static const int pool_stop_mark;
static void *pool_consumer(void *arg) {
    pool_relay *r = arg;
    for (int i = 0; i < 64; i++) {
        mcdc_batch *b;
        while ((b = __atomic_load_n(&r->handoff[i], __ATOMIC_ACQUIRE)) == NULL) sched_yield();
        if (b == POOL_STOP) break;
        mcdc_batch_free(b);
    }
    return NULL;
}
TEST(batch_pool_across_threads) {
    pool_relay r = {pool_schema(), {0}, 0};
    pthread_t t;
    CHECK_EQ_INT(pthread_create(&t, NULL, pool_consumer, &r), 0);
    mcdc_error e = MCDC_ERROR_INIT;
    for (int i = 0; i < 64; i++) {
        mcdc_batch *b = NULL;
        if (mcdc_batch_create(&b, r.s, 16, &e) != MCDC_OK) { r.bad++; b = NULL; }
        if (b) {
            for (int c = 0; c < 4; c++)
                if (b->columns[c].length != 0 || b->columns[c].validity != NULL) r.bad++;
            pool_fill(b, 40 + i, i);
            if (mcdc_batch_seal(b, &e) != MCDC_OK || mcdc_batch_validate(b, &e) != MCDC_OK) r.bad++;
        }
        __atomic_store_n(&r.handoff[i], b ? b : POOL_STOP, __ATOMIC_RELEASE);
        if (!b) break;
    }
    pthread_join(t, NULL);
    CHECK_EQ_INT(r.bad, 0);
    mcdc_schema_unref(r.s);
}

/* A batch widened after it was filled (bronze's columns added, as every
 * writer of bronze does) returns its columns to the pool of the schema it
 * was created with, which its producer takes from: not to the wide
 * schema's, which no producer creates from. */
TEST(batch_pool_takes_back_a_widened_batch_as_created) {
    mcdc_schema *s = pool_schema(), *w = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_schema_create(&w, 6, &e), MCDC_OK);
    for (int32_t i = 0; i < 4; i++) {
        const mcdc_field *f = &s->fields[i];
        CHECK_EQ_INT(mcdc_schema_set(w, i, f->name, f->type, f->precision, f->scale, f->byte_width,
                                     f->nullable, &e),
                     MCDC_OK);
    }
    CHECK_EQ_INT(mcdc_schema_set(w, 4, "_snapshot", MCDC_TYPE_UTF8, 0, 0, 0, true, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_schema_set(w, 5, "_chunk", MCDC_TYPE_INT32, 0, 0, 0, true, &e), MCDC_OK);
    mcdc_batch *a = NULL, *b = NULL;
    CHECK_EQ_INT(mcdc_batch_create(&a, s, 100, &e), MCDC_OK);
    pool_fill(a, 900, 3);
    CHECK_EQ_INT(mcdc_batch_seal(a, &e), MCDC_OK);
    const uint8_t *data = a->columns[0].data;
    int64_t cap = a->columns[1].capacity;
    CHECK_EQ_INT(mcdc_batch_widen(a, w, &e), MCDC_OK);
    CHECK(a->schema == w);
    CHECK_EQ_INT(mcdc_col_fill_text(&a->columns[4], "0x0000000000000000002A", 900, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_col_append_nulls(&a->columns[5], 900, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_batch_seal(a, &e), MCDC_OK);
    mcdc_batch_free(a);
    CHECK(w->pool == NULL); /* nothing kept for the wide schema */
    CHECK_EQ_INT(mcdc_batch_create(&b, s, 100, &e), MCDC_OK);
    CHECK(b->schema == s);
    CHECK(b->columns[0].data == data); /* the widened batch's buffers */
    CHECK_EQ_INT(b->columns[1].capacity, cap);
    for (int32_t c = 0; c < 4; c++) {
        CHECK(b->columns[c].field == &s->fields[c]);
        CHECK_EQ_INT(b->columns[c].length, 0);
        CHECK(b->columns[c].validity == NULL);
    }
    /* filled again, it is what a fresh batch is */
    CHECK(fills_as_fresh(b, 500, 4));
    /* widened twice (through a schema as wide as it), still the first one's */
    CHECK_EQ_INT(mcdc_batch_widen(b, w, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_batch_widen(b, w, &e), MCDC_OK);
    CHECK(b->created == s);
    mcdc_batch_free(b);
    mcdc_schema_unref(w);
    mcdc_schema_unref(s); /* frees the pooled buffers: the runner checks leaks */
}
