#include "mcdc_reader.h"
#include "mcdc_test.h"

static mcdc_lsn L(unsigned v) {
    mcdc_lsn l;
    mcdc_lsn_from_pair(&l, 0, v, NULL);
    return l;
}
static mcdc_split_point T(unsigned bound, int64_t rows) {
    mcdc_split_point p;
    p.bound = L(bound);
    p.next_start = L(bound + 1);
    p.rows = rows;
    return p;
}
static unsigned U(const mcdc_lsn *l) {
    uint64_t hi, lo;
    mcdc_lsn_to_pair(&hi, &lo, l);
    return (unsigned)lo;
}

TEST(plan_small_batches_read_in_one_range) {
    mcdc_split_point t[] = {T(10, 20000), T(20, 20000), T(30, 20000), T(40, 20000)};
    mcdc_lsn from = L(1), to = L(100);
    mcdc_lsn_range *r = NULL;
    int n = 0;
    /* 80,000 rows: tiles merge to 60,000 then a 20,000 tail joins it */
    CHECK_EQ_INT(mcdc_reader_plan_ranges(&r, &n, t, 4, &from, &to, 50000, NULL), MCDC_OK);
    CHECK_EQ_INT(n, 1);
    if (n == 1) {
        CHECK_EQ_INT(U(&r[0].from), 1);
        CHECK_EQ_INT(U(&r[0].to), 100);
        CHECK_EQ_INT(r[0].rows_estimate, 80000);
        CHECK(r[0].last);
    }
    mcdc_free(r);
    /* no tiles (numPartitions 1, or no change rows): one range */
    CHECK_EQ_INT(mcdc_reader_plan_ranges(&r, &n, NULL, 0, &from, &to, 50000, NULL), MCDC_OK);
    CHECK_EQ_INT(n, 1);
    if (n == 1) CHECK(r[0].last && U(&r[0].to) == 100);
    mcdc_free(r);
    /* an empty interval: no range */
    CHECK_EQ_INT(mcdc_reader_plan_ranges(&r, &n, NULL, 0, &to, &from, 50000, NULL), MCDC_OK);
    CHECK_EQ_INT(n, 0);
    CHECK(r == NULL);
}

TEST(plan_large_batches_keep_balanced_commit_aligned_ranges) {
    mcdc_split_point t[] = {T(10, 60000), T(20, 60000), T(30, 60000), T(40, 60000)};
    mcdc_lsn from = L(5), to = L(90);
    mcdc_lsn_range *r = NULL;
    int n = 0;
    CHECK_EQ_INT(mcdc_reader_plan_ranges(&r, &n, t, 4, &from, &to, 50000, NULL), MCDC_OK);
    CHECK_EQ_INT(n, 4);
    if (n == 4) {
        CHECK_EQ_INT(U(&r[0].from), 5);
        CHECK_EQ_INT(U(&r[0].to), 10);
        CHECK_EQ_INT(U(&r[1].from), 11); /* next start = increment(bound) */
        CHECK_EQ_INT(U(&r[1].to), 20);
        CHECK_EQ_INT(U(&r[3].from), 31);
        CHECK_EQ_INT(U(&r[3].to), 90);   /* the last range runs to the batch end */
        CHECK(!r[0].last && !r[2].last && r[3].last);
        int64_t sum = 0;
        for (int i = 0; i < n; i++) sum += r[i].rows_estimate;
        CHECK_EQ_INT(sum, 240000);
        /* contiguous, no gap, no overlap */
        for (int i = 1; i < n; i++) {
            mcdc_lsn nx;
            mcdc_lsn_increment(&nx, &r[i - 1].to, NULL);
            CHECK_EQ_INT(mcdc_lsn_cmp(&nx, &r[i].from), 0);
        }
    }
    mcdc_free(r);
    /* small tiles merge; a short tail joins the previous range */
    mcdc_split_point u[] = {T(10, 30000), T(20, 30000), T(30, 30000), T(40, 30000), T(50, 1000)};
    CHECK_EQ_INT(mcdc_reader_plan_ranges(&r, &n, u, 5, &from, &to, 50000, NULL), MCDC_OK);
    CHECK_EQ_INT(n, 2);
    if (n == 2) {
        CHECK_EQ_INT(U(&r[0].to), 20);
        CHECK_EQ_INT(r[0].rows_estimate, 60000);
        CHECK_EQ_INT(U(&r[1].from), 21);
        CHECK_EQ_INT(U(&r[1].to), 90);
        CHECK_EQ_INT(r[1].rows_estimate, 61000);
    }
    mcdc_free(r);
}
