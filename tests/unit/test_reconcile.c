/* test_reconcile.c - reconcile's pure parts: the bucket grid and its merge,
 * the row hash (equal exactly when the canonical texts are), the verdicts,
 * the sample, the key set and the chunk checks. */
#include <stdio.h>
#include <stdlib.h>

#include "mcdc_reconcile.h"
#include "mcdc_value_text.h"
#include "mcdc_test.h"

TEST(reconcile_floor_division_and_fine_width) {
    CHECK_EQ_INT(rec_floor_div(7, 5), 1);
    CHECK_EQ_INT(rec_floor_div(5, 5), 1);
    CHECK_EQ_INT(rec_floor_div(0, 5), 0);
    CHECK_EQ_INT(rec_floor_div(-1, 5), -1);
    CHECK_EQ_INT(rec_floor_div(-5, 5), -1);
    CHECK_EQ_INT(rec_floor_div(-6, 5), -2);
    CHECK_EQ_INT(rec_floor_div(INT64_MIN, 1), INT64_MIN);
    /* the range in about REC_FINE buckets, never 0 wide */
    CHECK_EQ_INT(rec_fine_width(1, 1), 1);
    CHECK_EQ_INT(rec_fine_width(1, REC_FINE), 1);
    CHECK_EQ_INT(rec_fine_width(1, REC_FINE + 1), 2);
    CHECK_EQ_INT(rec_fine_width(-10000000, 9999999), 200);
    /* the whole bigint range: no overflow */
    CHECK(rec_fine_width(INT64_MIN, INT64_MAX) > (int64_t)1 << 40);
}

static rec_fine fine(int64_t id, int64_t rows, int64_t sum) { return (rec_fine){id, rows, sum}; }

TEST(reconcile_buckets_merge_fine_counts_by_the_larger_side) {
    /* width 10; the source holds ids 0..5, silver lacks id 2 and has a stray 9 */
    rec_fine src[] = {fine(0, 4, 10), fine(1, 4, 50), fine(2, 4, 90), fine(3, 4, 130),
                      fine(4, 4, 170), fine(5, 1, 55)};
    rec_fine sil[] = {fine(0, 4, 10), fine(1, 4, 50), fine(3, 4, 130), fine(4, 4, 170),
                      fine(5, 1, 55), fine(9, 1, 95)};
    mcdc_error e = MCDC_ERROR_INIT;
    rec_bucket *b = NULL;
    int64_t n = 0;
    CHECK_EQ_INT(rec_merge_buckets(&b, &n, src, 6, sil, 6, 10, 8, &e), MCDC_OK);
    /* buckets of 8 rows: {0,1}, {2,3}, {4,5,9} */
    CHECK_EQ_INT(n, 3);
    if (n == 3) {
        CHECK(!b[0].has_lo && b[0].has_hi && b[0].hi == 20);
        CHECK(b[1].has_lo && b[1].lo == 20 && b[1].has_hi && b[1].hi == 40);
        CHECK(b[2].has_lo && b[2].lo == 40 && !b[2].has_hi); /* the last is open above */
        /* the report names the grid's ends, as the reference does */
        CHECK(b[0].rep_has_lo && b[0].rep_lo == 0 && b[0].rep_has_hi && b[0].rep_hi == 20);
        CHECK(b[1].rep_has_lo && b[1].rep_lo == 20 && b[1].rep_hi == 40);
        CHECK(b[2].rep_has_lo && b[2].rep_lo == 40 && b[2].rep_has_hi && b[2].rep_hi == 100);
        CHECK_EQ_INT(b[0].src_rows, 8);
        CHECK_EQ_INT(b[1].src_rows, 8);
        CHECK_EQ_INT(b[1].sil_rows, 4);
        CHECK_EQ_INT(b[2].src_rows, 5);
        CHECK_EQ_INT(b[2].sil_rows, 6);
        CHECK(b[0].src_sum == 60 && b[0].sil_sum == 60);
        CHECK_EQ_INT(rec_bucket_status(&b[0]), REC_MATCH);
        CHECK_EQ_INT(rec_bucket_status(&b[1]), REC_MISMATCH);
        b[1].moved = true;
        CHECK_EQ_INT(rec_bucket_status(&b[1]), REC_IN_FLIGHT);
        /* every fine id falls in one bucket, strays and all */
        CHECK_EQ_INT(rec_bucket_of(b, n, -100), 0);
        CHECK_EQ_INT(rec_bucket_of(b, n, 1), 0);
        CHECK_EQ_INT(rec_bucket_of(b, n, 2), 1);
        CHECK_EQ_INT(rec_bucket_of(b, n, 3), 1);
        CHECK_EQ_INT(rec_bucket_of(b, n, 4), 2);
        CHECK_EQ_INT(rec_bucket_of(b, n, 1000), 2);
    }
    mcdc_free(b);
    /* equal rows, other sums: a MISMATCH (a key moved within the bucket) */
    rec_fine a1[] = {fine(0, 2, 3)}, a2[] = {fine(0, 2, 4)};
    CHECK_EQ_INT(rec_merge_buckets(&b, &n, a1, 1, a2, 1, 10, 8, &e), MCDC_OK);
    CHECK_EQ_INT(n, 1);
    CHECK(n == 1 && !b[0].has_lo && !b[0].has_hi && rec_bucket_status(&b[0]) == REC_MISMATCH);
    mcdc_free(b);
    /* both empty: none */
    CHECK_EQ_INT(rec_merge_buckets(&b, &n, NULL, 0, NULL, 0, 10, 8, &e), MCDC_OK);
    CHECK(n == 0 && b == NULL);
    CHECK_EQ_INT(rec_bucket_of(NULL, 0, 3), -1);
    /* only silver: its buckets, the source's counts zero */
    CHECK_EQ_INT(rec_merge_buckets(&b, &n, NULL, 0, a2, 1, 10, 8, &e), MCDC_OK);
    CHECK(n == 1 && b[0].src_rows == 0 && b[0].sil_rows == 2);
    mcdc_free(b);
    /* keys at the top of bigint: ids of real values give bounds that fit */
    int64_t top = rec_floor_div(INT64_MAX, 4), low = rec_floor_div(INT64_MIN, 4);
    rec_fine big[] = {fine(low, 1, 1), fine(top - 2, 1, 1), fine(top, 1, 1)};
    CHECK_EQ_INT(rec_merge_buckets(&b, &n, big, 3, NULL, 0, 4, 1, &e), MCDC_OK);
    CHECK_EQ_INT(n, 3);
    CHECK(n == 3 && !b[0].has_lo && b[0].has_hi && b[0].hi == (top - 2) * 4);
    CHECK(n == 3 && b[2].has_lo && b[2].lo == top * 4 && !b[2].has_hi);
    /* the report's: low * 4 fits, (top + 1) * 4 is past int64 (open) */
    CHECK(n == 3 && b[0].rep_has_lo && b[0].rep_lo == low * 4 && !b[2].rep_has_hi);
    mcdc_free(b);
}

TEST(reconcile_failure_types_and_names) {
    CHECK_EQ_INT(rec_key_failure(true, false, false), MCDC_RECONCILE_MISSING_TARGET);
    CHECK_EQ_INT(rec_key_failure(false, true, false), MCDC_RECONCILE_MISSING_SOURCE);
    CHECK_EQ_INT(rec_key_failure(true, true, false), MCDC_RECONCILE_RECORD_DIFF);
    CHECK_EQ_INT(rec_key_failure(true, true, true), MCDC_RECONCILE_IN_FLIGHT);
    CHECK_EQ_INT(rec_key_failure(false, true, true), MCDC_RECONCILE_IN_FLIGHT);
    CHECK_EQ_STR(mcdc_reconcile_failure_name(MCDC_RECONCILE_MISSING_TARGET), "MISSING_TARGET");
    CHECK_EQ_STR(mcdc_reconcile_failure_name(MCDC_RECONCILE_CHUNK_STAMP), "CHUNK_STAMP");
    CHECK_EQ_STR(mcdc_reconcile_failure_name(MCDC_RECONCILE_DUPLICATE_TARGET), "DUPLICATE_TARGET");
    CHECK(mcdc_reconcile_failure_name(MCDC_RECONCILE_FAILURE_TYPES) == NULL);
    CHECK(mcdc_reconcile_failure_name(-1) == NULL);
    CHECK_EQ_STR(rec_status_name(REC_MATCH), "MATCH");
    CHECK_EQ_STR(rec_status_name(REC_IN_FLIGHT), "IN_FLIGHT");
    CHECK_EQ_STR(rec_status_name(REC_MISMATCH), "MISMATCH");
    /* differs: a MISMATCH or any failure but IN_FLIGHT */
    mcdc_reconcile_result r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    r.in_flight = 3;
    r.failures[MCDC_RECONCILE_IN_FLIGHT] = 5;
    CHECK(!mcdc_reconcile_differs(&r));
    r.failures[MCDC_RECONCILE_CHUNK_ROWS] = 1;
    CHECK(mcdc_reconcile_differs(&r));
    r.failures[MCDC_RECONCILE_CHUNK_ROWS] = 0;
    r.duplicate_target = 1; /* a key silver holds twice */
    CHECK(mcdc_reconcile_differs(&r));
    r.duplicate_target = 0;
    r.mismatch = 1;
    CHECK(mcdc_reconcile_differs(&r));
}

/* A batch of (id int32, name utf8, amount decimal(18,4), d date32, b binary). */
static mcdc_batch *rows5(mcdc_type_id id_type) {
    mcdc_schema *s;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_schema_create(&s, 5, &e);
    mcdc_schema_set(s, 0, "id", id_type, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 1, "name", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 2, "amount", MCDC_TYPE_DECIMAL, 18, 4, 0, true, &e);
    mcdc_schema_set(s, 3, "d", MCDC_TYPE_DATE32, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 4, "b", MCDC_TYPE_BINARY, 0, 0, 0, true, &e);
    mcdc_batch *b;
    mcdc_batch_create(&b, s, 4, &e);
    mcdc_schema_unref(s);
    return b;
}

static void add_row(mcdc_batch *b, int64_t id, const char *name, int64_t amount, bool has_d,
                    int32_t d, const char *bin) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_col_append_int(&b->columns[0], id, &e);
    name ? mcdc_col_append_bytes(&b->columns[1], name, (int64_t)strlen(name), &e)
         : mcdc_col_append_null(&b->columns[1], &e);
    mcdc_col_append_decimal(&b->columns[2], (uint64_t)amount, amount < 0 ? -1 : 0, &e);
    has_d ? mcdc_col_append_int(&b->columns[3], d, &e) : mcdc_col_append_null(&b->columns[3], &e);
    bin ? mcdc_col_append_bytes(&b->columns[4], bin, (int64_t)strlen(bin), &e)
        : mcdc_col_append_null(&b->columns[4], &e);
}

TEST(reconcile_row_hash_is_the_canonical_text_s) {
    mcdc_batch *a = rows5(MCDC_TYPE_INT32), *z = rows5(MCDC_TYPE_INT64);
    add_row(a, 1, "x", 15000, true, 19000, "ab");
    add_row(a, 2, NULL, -5, false, 0, NULL);
    add_row(a, 3, "", 0, true, 0, "");
    add_row(a, 4, "y", 1, true, 1, "q");
    /* the same values, the id as int64: the same hashes */
    add_row(z, 1, "x", 15000, true, 19000, "ab");
    add_row(z, 2, NULL, -5, false, 0, NULL);
    add_row(z, 3, "", 0, true, 0, "");
    add_row(z, 4, "y", 1, true, 2, "q"); /* d differs */
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_batch_seal(a, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_batch_seal(z, &e), MCDC_OK);
    const mcdc_column *ca[5], *cz[5];
    for (int i = 0; i < 5; i++) {
        ca[i] = &a->columns[i];
        cz[i] = &z->columns[i];
    }
    rec_hash ha[4], hz[4];
    CHECK_EQ_INT(rec_hash_rows(ha, ca, 5, 0, 4, &e), MCDC_OK);
    CHECK_EQ_INT(rec_hash_rows(hz, cz, 5, 0, 4, &e), MCDC_OK);
    CHECK(rec_hash_eq(ha[0], hz[0]));
    CHECK(rec_hash_eq(ha[1], hz[1]));
    CHECK(rec_hash_eq(ha[2], hz[2]));
    CHECK(!rec_hash_eq(ha[3], hz[3]));
    /* rows differ from each other; NULL is not "" (row 2 vs 3) */
    CHECK(!rec_hash_eq(ha[0], ha[1]) && !rec_hash_eq(ha[1], ha[2]) && !rec_hash_eq(ha[0], ha[2]));
    /* a column a side lacks hashes as NULL */
    const mcdc_column *gap[5] = {ca[0], NULL, ca[2], NULL, NULL};
    rec_hash hg[1];
    CHECK_EQ_INT(rec_hash_rows(hg, gap, 5, 1, 1, &e), MCDC_OK);
    CHECK(rec_hash_eq(hg[0], ha[1]));
    /* order matters: (name, b) is not (b, name) */
    const mcdc_column *ab[2] = {ca[1], ca[4]}, *ba[2] = {ca[4], ca[1]};
    rec_hash h1[1], h2[1];
    rec_hash_rows(h1, ab, 2, 3, 1, &e);
    rec_hash_rows(h2, ba, 2, 3, 1, &e);
    CHECK(!rec_hash_eq(h1[0], h2[0]));
    /* cells compare by text too */
    bool eq;
    CHECK_EQ_INT(rec_cell_eq(&eq, ca[0], 0, cz[0], 0, &e), MCDC_OK);
    CHECK(eq);
    CHECK_EQ_INT(rec_cell_eq(&eq, ca[3], 3, cz[3], 3, &e), MCDC_OK);
    CHECK(!eq);
    CHECK_EQ_INT(rec_cell_eq(&eq, ca[1], 1, cz[1], 1, &e), MCDC_OK); /* NULL, NULL */
    CHECK(eq);
    CHECK_EQ_INT(rec_cell_eq(&eq, ca[1], 1, ca[1], 2, &e), MCDC_OK); /* NULL, "" */
    CHECK(!eq);
    CHECK_EQ_INT(rec_cell_eq(&eq, NULL, 0, ca[4], 1, &e), MCDC_OK); /* lacking, NULL */
    CHECK(eq);
    mcdc_batch_free(a);
    mcdc_batch_free(z);
    /* the byte hash: seeds and every byte count */
    rec_hash x = rec_hash_bytes("abcdefghij", 10, 1), y = rec_hash_bytes("abcdefghik", 10, 1);
    CHECK(!rec_hash_eq(x, y));
    CHECK(!rec_hash_eq(x, rec_hash_bytes("abcdefghij", 10, 2)));
    CHECK(rec_hash_eq(x, rec_hash_bytes("abcdefghij", 10, 1)));
    CHECK(!rec_hash_eq(rec_hash_bytes("", 0, 1), rec_hash_bytes("\0", 1, 1)));
}

TEST(reconcile_sample_is_seeded_sorted_and_sized) {
    mcdc_error e = MCDC_ERROR_INIT;
    int64_t *v = NULL, k = 0, *w = NULL, kw = 0;
    CHECK_EQ_INT(rec_sample(&v, &k, 1000, 0.01, 42, &e), MCDC_OK);
    CHECK_EQ_INT(k, 10);
    for (int64_t i = 1; i < k; i++) CHECK(v[i - 1] < v[i] && v[i] < 1000);
    CHECK_EQ_INT(rec_sample(&w, &kw, 1000, 0.01, 42, &e), MCDC_OK);
    CHECK(kw == k && memcmp(v, w, (size_t)k * sizeof *v) == 0);
    mcdc_free(w);
    CHECK_EQ_INT(rec_sample(&w, &kw, 1000, 0.01, 43, &e), MCDC_OK);
    CHECK(kw == k && memcmp(v, w, (size_t)k * sizeof *v) != 0);
    mcdc_free(v);
    mcdc_free(w);
    /* ceil: one bucket of three at 0.01; all at 1; none at 0 or of none */
    CHECK_EQ_INT(rec_sample(&v, &k, 3, 0.01, 1, &e), MCDC_OK);
    CHECK_EQ_INT(k, 1);
    mcdc_free(v);
    CHECK_EQ_INT(rec_sample(&v, &k, 5, 1.0, 1, &e), MCDC_OK);
    CHECK(k == 5 && v[0] == 0 && v[4] == 4);
    mcdc_free(v);
    CHECK_EQ_INT(rec_sample(&v, &k, 5, 0.0, 1, &e), MCDC_OK);
    CHECK(k == 0 && v == NULL);
    CHECK_EQ_INT(rec_sample(&v, &k, 0, 0.5, 1, &e), MCDC_OK);
    CHECK(k == 0 && v == NULL);
}

TEST(reconcile_keyset_finds_what_it_holds) {
    rec_keyset s = {0};
    mcdc_error e = MCDC_ERROR_INIT;
    char key[32];
    for (int i = 0; i < 5000; i++) {
        int n = snprintf(key, sizeof key, "k%d", i);
        int64_t idx;
        bool added;
        CHECK_EQ_INT(rec_keyset_add(&s, (const uint8_t *)key, (size_t)n, &idx, &added, &e), MCDC_OK);
        if (!added || idx != i) CHECK(added && idx == i);
        s.val[idx] = i * 3;
    }
    int64_t idx;
    bool added;
    CHECK_EQ_INT(rec_keyset_add(&s, (const uint8_t *)"k77", 3, &idx, &added, &e), MCDC_OK);
    CHECK(!added && idx == 77 && s.val[idx] == 231);
    CHECK_EQ_INT(rec_keyset_find(&s, (const uint8_t *)"k4999", 5), 4999);
    CHECK_EQ_INT(rec_keyset_find(&s, (const uint8_t *)"k5000", 5), -1);
    CHECK_EQ_INT(rec_keyset_find(&s, (const uint8_t *)"k7", 1), -1); /* a prefix is not the key */
    CHECK_EQ_INT(rec_keyset_add(&s, (const uint8_t *)"", 0, &idx, &added, &e), MCDC_OK);
    CHECK(added && rec_keyset_find(&s, (const uint8_t *)"", 0) == idx);
    CHECK_EQ_INT(s.n, 5001);
    rec_keyset_clear(&s);
    CHECK_EQ_INT(rec_keyset_find(&s, (const uint8_t *)"k1", 2), -1);
}

static rec_chunk chunk(int64_t i, char *lo, char *hi, bool last, int64_t rows, const char *lsn) {
    rec_chunk c = {.chunk = i, .lo = lo, .hi = hi, .last = last, .rows = rows};
    snprintf(c.lsn, sizeof c.lsn, "%s", lsn);
    return c;
}

static int count_type(const rec_chunk_failure *v, int64_t n, mcdc_reconcile_failure t) {
    int k = 0;
    for (int64_t i = 0; i < n; i++) k += v[i].type == t;
    return k;
}

TEST(reconcile_chunk_checks_tiling_rows_and_stamps) {
    const char *S = "0x00000010000000100001";
    char a[] = "100", b[] = "200", c[] = "300";
    mcdc_error e = MCDC_ERROR_INIT;
    rec_chunk_failure *f = NULL;
    int64_t n = 0;
    /* a good complete snapshot: none */
    rec_chunk ok[] = {chunk(0, NULL, a, false, 10, S), chunk(1, a, b, false, 5, S),
                      chunk(2, b, NULL, true, 7, "0x00000010000000200001")};
    rec_held h[] = {{0, 10, ""}, {1, 5, ""}, {2, 7, "0x00000010000000200001"}};
    CHECK_EQ_INT(rec_tiling_failures(&f, &n, S, true, ok, 3, h, 3, &e), MCDC_OK);
    CHECK_EQ_INT(n, 0);
    rec_chunk_failures_free(f, n);
    /* still open: a wave missing at the end is no failure */
    CHECK_EQ_INT(rec_tiling_failures(&f, &n, S, false, ok, 2, h, 2, &e), MCDC_OK);
    CHECK_EQ_INT(n, 0);
    rec_chunk_failures_free(f, n);
    /* ... but complete, the last not the plan's final */
    CHECK_EQ_INT(rec_tiling_failures(&f, &n, S, true, ok, 2, h, 2, &e), MCDC_OK);
    CHECK_EQ_INT(n, 1);
    CHECK(n == 1 && f[0].type == MCDC_RECONCILE_CHUNK_TILING && f[0].chunk == 1 &&
          strstr(f[0].detail, "final") && strstr(f[0].detail, S));
    rec_chunk_failures_free(f, n);
    /* a gap (chunk 1 missing), a chunk twice, a bad start, a first closed below */
    rec_chunk bad[] = {chunk(0, a, a, false, 10, S), chunk(2, c, NULL, true, 7, S),
                       chunk(2, c, NULL, true, 7, S)};
    rec_held h2[] = {{0, 10, ""}, {2, 7, ""}};
    CHECK_EQ_INT(rec_tiling_failures(&f, &n, S, false, bad, 3, h2, 2, &e), MCDC_OK);
    CHECK_EQ_INT(count_type(f, n, MCDC_RECONCILE_CHUNK_TILING), 3); /* closed below, no 1, twice */
    CHECK_EQ_INT(n, 3);
    rec_chunk_failures_free(f, n);
    rec_chunk skew[] = {chunk(0, NULL, a, false, 10, S), chunk(1, b, c, false, 5, S)};
    CHECK_EQ_INT(rec_tiling_failures(&f, &n, S, false, skew, 2, h, 2, &e), MCDC_OK);
    CHECK(n == 1 && f[0].chunk == 1 && strstr(f[0].detail, "where the one before ended"));
    rec_chunk_failures_free(f, n);
    /* rows: facts count other than bronze's; bronze rows of a chunk no facts row names */
    rec_held h3[] = {{0, 9, ""}, {1, 5, ""}, {2, 7, ""}, {3, 1, ""}};
    CHECK_EQ_INT(rec_tiling_failures(&f, &n, S, true, ok, 3, h3, 4, &e), MCDC_OK);
    CHECK_EQ_INT(count_type(f, n, MCDC_RECONCILE_CHUNK_ROWS), 2);
    CHECK(n == 2 && strstr(f[0].detail, "\"facts_rows\":10,\"bronze_rows\":9") &&
          strstr(f[1].detail, "\"facts_rows\":null"));
    CHECK(n == 2 && f[0].lo == NULL && f[0].hi == a && f[1].lo == NULL);
    rec_chunk_failures_free(f, n);
    /* a stamp below S (the facts row's, or a bronze row's) */
    rec_chunk stale[] = {chunk(0, NULL, a, false, 10, "0x00000001000000100001"),
                         chunk(1, a, NULL, true, 5, S)};
    rec_held h4[] = {{0, 10, ""}, {1, 5, "0x00000002000000100001"}};
    CHECK_EQ_INT(rec_tiling_failures(&f, &n, S, true, stale, 2, h4, 2, &e), MCDC_OK);
    CHECK_EQ_INT(count_type(f, n, MCDC_RECONCILE_CHUNK_STAMP), 2);
    CHECK(n == 2 && strstr(f[1].detail, "0x00000002000000100001"));
    rec_chunk_failures_free(f, n);
}

TEST(reconcile_api_refuses_bad_configs_and_prints_the_result) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_opts *o = NULL;
    CHECK_EQ_INT(mcdc_opts_create(&o, &e), MCDC_OK);
    mcdc_reconcile *r = NULL;
    mcdc_reconcile_cfg cfg = MCDC_RECONCILE_CFG_INIT;
    cfg.bronze = "b";
    cfg.control_table = "c";
    CHECK_EQ_INT(mcdc_reconcile_create(&r, o, &cfg, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "silver") != NULL && r == NULL);
    cfg.silver = "s";
    CHECK_EQ_INT(mcdc_reconcile_create(&r, o, &cfg, &e), MCDC_E_INVALID); /* no source options */
    CHECK(strstr(e.message, "connectionString") != NULL);
    CHECK_EQ_INT(mcdc_opts_set(o, "connectionString", "Server=127.0.0.1,1;UID=u;PWD=p", NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_opts_set(o, "captureInstance", "dbo_t", NULL, &e), MCDC_OK);
    cfg.sample = 1.5;
    CHECK_EQ_INT(mcdc_reconcile_create(&r, o, &cfg, &e), MCDC_E_INVALID);
    cfg.sample = 0.5;
    cfg.bucket_rows = -1;
    CHECK_EQ_INT(mcdc_reconcile_create(&r, o, &cfg, &e), MCDC_E_INVALID);
    cfg.bucket_rows = 0;
    cfg.version = 99;
    CHECK_EQ_INT(mcdc_reconcile_create(&r, o, &cfg, &e), MCDC_E_INVALID);
    cfg.version = MCDC_RECONCILE_CFG_VERSION;
    CHECK_EQ_INT(mcdc_reconcile_create(&r, o, &cfg, &e), MCDC_OK);
    mcdc_reconcile_free(r);
    /* repair needs the facts table; a version-1 cfg has no repair flag to read */
    cfg.repair = true;
    CHECK_EQ_INT(mcdc_reconcile_create(&r, o, &cfg, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "facts") != NULL && r == NULL);
    cfg.version = 1;
    CHECK_EQ_INT(mcdc_reconcile_create(&r, o, &cfg, &e), MCDC_OK);
    mcdc_reconcile_free(r);
    cfg.version = MCDC_RECONCILE_CFG_VERSION;
    cfg.facts_table = "f";
    CHECK_EQ_INT(mcdc_reconcile_create(&r, o, &cfg, &e), MCDC_OK);
    mcdc_reconcile_free(r);
    /* settle_seconds: 0 to a day; a version-2 cfg has none to read */
    cfg.settle_seconds = -1;
    CHECK_EQ_INT(mcdc_reconcile_create(&r, o, &cfg, &e), MCDC_E_INVALID);
    cfg.settle_seconds = REC_SETTLE_SECONDS_MAX + 1;
    CHECK_EQ_INT(mcdc_reconcile_create(&r, o, &cfg, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "settle_seconds") != NULL);
    cfg.version = 2;
    CHECK_EQ_INT(mcdc_reconcile_create(&r, o, &cfg, &e), MCDC_OK);
    mcdc_reconcile_free(r);
    cfg.version = MCDC_RECONCILE_CFG_VERSION;
    cfg.settle_seconds = 30;
    CHECK_EQ_INT(mcdc_reconcile_create(&r, o, &cfg, &e), MCDC_OK);
    mcdc_reconcile_free(r);
    cfg.version = 0;
    CHECK_EQ_INT(mcdc_reconcile_create(&r, o, &cfg, &e), MCDC_E_INVALID);
    mcdc_opts_free(o);
    /* the JSON: the reference's keys first, failures by type */
    mcdc_reconcile_result res;
    memset(&res, 0, sizeof res);
    res.size = sizeof res;
    snprintf(res.run_id, sizeof res.run_id, "0b7c6c36-7c4c-4b5e-9d4e-1a2b3c4d5e6f");
    snprintf(res.source_lsn, sizeof res.source_lsn, "0x00000010000000100001");
    res.silver_version = 4;
    res.buckets = 3;
    res.match = 2;
    res.mismatch = 1;
    res.hashed = 1;
    res.failures[MCDC_RECONCILE_RECORD_DIFF] = 2;
    res.failures[MCDC_RECONCILE_IN_FLIGHT] = 1;
    char j[MCDC_RECONCILE_RESULT_JSON_SIZE];
    CHECK_EQ_INT(mcdc_reconcile_result_json(j, sizeof j, &res, &e), MCDC_OK);
    CHECK(strncmp(j, "{\"run_id\":\"0b7c6c36-7c4c-4b5e-9d4e-1a2b3c4d5e6f\",\"silver_version\":4,"
                     "\"silver_lsn\":null,\"source_lsn\":\"0x00000010000000100001\",\"buckets\":3,"
                     "\"match\":2,\"in_flight\":0,\"mismatch\":1,\"hashed\":1,\"failures\":"
                     "{\"RECORD_DIFF\":2,\"IN_FLIGHT\":1},",
                  200) == 0);
    CHECK(strstr(j, "\"differs\":true,\"verified\":false,\"rechecks\":0}") != NULL);
    CHECK(strstr(j, "\"repair\"") == NULL);
    /* a key silver holds twice: DUPLICATE_TARGET, after the seven failures[] counts; differs */
    res.mismatch = 0;
    res.failures[MCDC_RECONCILE_RECORD_DIFF] = 0;
    res.duplicate_target = 1;
    res.verified = true;
    res.rechecks = 2;
    CHECK_EQ_INT(mcdc_reconcile_result_json(j, sizeof j, &res, &e), MCDC_OK);
    CHECK(strstr(j, "\"failures\":{\"IN_FLIGHT\":1,\"DUPLICATE_TARGET\":1}") != NULL);
    CHECK(strstr(j, "\"differs\":true,\"verified\":true,\"rechecks\":2}") != NULL);
    res.mismatch = 1;
    res.failures[MCDC_RECONCILE_RECORD_DIFF] = 2;
    res.duplicate_target = 0;
    CHECK_EQ_INT(mcdc_reconcile_result_json(j, 20, &res, &e), MCDC_E_LIMIT);
    /* with a repair: its result as the last member */
    res.repaired = true;
    snprintf(res.repair.run_id, sizeof res.repair.run_id, "%s", res.run_id);
    res.repair.keys = 3;
    res.repair.images = 2;
    res.repair.deletes = 1;
    res.repair.bronze_version = 7;
    CHECK_EQ_INT(mcdc_reconcile_result_json(j, sizeof j, &res, &e), MCDC_OK);
    CHECK(strstr(j, "\"rechecks\":2,\"repair\":{\"run_id\":\"0b7c6c36-7c4c-4b5e-9d4e-1a2b3c4d5e6f\","
                    "\"lsn\":null,\"commit_ts\":null,\"keys\":3,\"images\":2,\"deletes\":1,"
                    "\"bronze_version\":7,\"already\":false}}") != NULL);
    size_t full = strlen(j);
    CHECK_EQ_INT(mcdc_reconcile_result_json(j, full, &res, &e), MCDC_E_LIMIT);
    CHECK_EQ_INT(mcdc_reconcile_result_json(j, full + 1, &res, &e), MCDC_OK);
}

/* The cell hash against the canonical text it stands for: over columns of
 * every type and small values (so that equal ones are frequent, across
 * widths and types too), two cells hash alike exactly when their texts are
 * equal, within a family (exact numbers, floating point, dates, timestamps,
 * bools, binaries, strings); cells of two families never do. */
enum { F_NUM, F_FLT, F_DATE, F_TS, F_BOOL, F_BIN, F_STR };
TEST(reconcile_cell_hash_is_equal_exactly_when_the_text_is) {
    static const struct {
        mcdc_type_id t;
        int32_t p, s, w;
        int fam;
    } T[] = {
        {MCDC_TYPE_INT8, 0, 0, 0, F_NUM},     {MCDC_TYPE_INT16, 0, 0, 0, F_NUM},
        {MCDC_TYPE_INT32, 0, 0, 0, F_NUM},    {MCDC_TYPE_INT64, 0, 0, 0, F_NUM},
        {MCDC_TYPE_DECIMAL, 38, 0, 0, F_NUM}, {MCDC_TYPE_DECIMAL, 10, 2, 0, F_NUM},
        {MCDC_TYPE_DECIMAL, 18, 2, 0, F_NUM}, {MCDC_TYPE_DECIMAL, 18, 4, 0, F_NUM},
        {MCDC_TYPE_FLOAT, 0, 0, 0, F_FLT},    {MCDC_TYPE_DOUBLE, 0, 0, 0, F_FLT},
        {MCDC_TYPE_DATE32, 0, 0, 0, F_DATE},  {MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0, F_TS},
        {MCDC_TYPE_TIMESTAMP_UTC, 0, 0, 0, F_TS}, {MCDC_TYPE_BOOL, 0, 0, 0, F_BOOL},
        {MCDC_TYPE_BINARY, 0, 0, 0, F_BIN},   {MCDC_TYPE_FIXED_BINARY, 0, 0, 2, F_BIN},
        {MCDC_TYPE_UTF8, 0, 0, 0, F_STR},
    };
    enum { NT = sizeof T / sizeof T[0], ROWS = 48 };
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_schema *s;
    CHECK_EQ_INT(mcdc_schema_create(&s, NT, &e), MCDC_OK);
    for (int i = 0; i < NT; i++) {
        char name[16];
        snprintf(name, sizeof name, "c%d", i);
        CHECK_EQ_INT(mcdc_schema_set(s, i, name, T[i].t, T[i].p, T[i].s, T[i].w, true, &e), MCDC_OK);
    }
    mcdc_batch *b;
    CHECK_EQ_INT(mcdc_batch_create(&b, s, ROWS, &e), MCDC_OK);
    mcdc_schema_unref(s);
    static const char *STR[] = {"1", "a", "", "ab", "0x0102", "abcdefghijk", "abcdefghijl"};
    uint64_t seed = 12345;
    for (int r = 0; r < ROWS; r++) {
        for (int i = 0; i < NT; i++) {
            mcdc_column *c = &b->columns[i];
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            int64_t v = (int64_t)((seed >> 33) % 5) - 2; /* -2..2 */
            if ((seed >> 40) % 7 == 0) {
                CHECK_EQ_INT(mcdc_col_append_null(c, &e), MCDC_OK);
                continue;
            }
            int rc;
            switch (T[i].t) {
            case MCDC_TYPE_DECIMAL: /* 100 at scale 2 is 1.00; both sides of a width */
                rc = mcdc_col_append_decimal(c, (uint64_t)(v * (T[i].s ? 50 : 1)), v < 0 ? -1 : 0, &e);
                break;
            case MCDC_TYPE_FLOAT:
            case MCDC_TYPE_DOUBLE: rc = mcdc_col_append_double(c, (double)v / 2, &e); break;
            case MCDC_TYPE_BOOL: rc = mcdc_col_append_bool(c, v > 0, &e); break;
            case MCDC_TYPE_BINARY:
            case MCDC_TYPE_FIXED_BINARY: {
                uint8_t x[2] = {(uint8_t)(v & 1), (uint8_t)(v + 2)};
                rc = mcdc_col_append_bytes(c, x, T[i].t == MCDC_TYPE_BINARY && v == 0 ? 1 : 2, &e);
                break;
            }
            case MCDC_TYPE_UTF8: {
                const char *t = STR[(v + 2 + r) % 7];
                rc = mcdc_col_append_bytes(c, t, (int64_t)strlen(t), &e);
                break;
            }
            default: rc = mcdc_col_append_int(c, v, &e); break;
            }
            CHECK_EQ_INT(rc, MCDC_OK);
        }
    }
    CHECK_EQ_INT(mcdc_batch_seal(b, &e), MCDC_OK);
    /* every cell's hash and text ("" and valid false: NULL) */
    rec_hash h[NT][ROWS];
    char *text[NT][ROWS];
    for (int i = 0; i < NT; i++) {
        const mcdc_column *c = &b->columns[i];
        for (int r = 0; r < ROWS; r++) {
            CHECK_EQ_INT(rec_hash_cells(&h[i][r], &c, 1, r, &e), MCDC_OK);
            text[i][r] = NULL;
            if (!mcdc_col_is_valid(c, r)) continue;
            mcdc_buf t = {0};
            CHECK_EQ_INT(mcdc_text_cell(&t, c, r, &e), MCDC_OK);
            CHECK_EQ_INT(mcdc_buf_cstr(&t, &e), MCDC_OK);
            text[i][r] = (char *)t.data;
        }
    }
    int64_t equal = 0, pairs = 0, bad = 0;
    for (int i = 0; i < NT; i++)
        for (int r = 0; r < ROWS; r++)
            for (int j = 0; j < NT; j++)
                for (int q = 0; q < ROWS; q++) {
                    const char *x = text[i][r], *y = text[j][q];
                    bool want = (x == NULL && y == NULL) ||
                                (x && y && T[i].fam == T[j].fam && strcmp(x, y) == 0);
                    bool got = rec_hash_eq(h[i][r], h[j][q]);
                    pairs++;
                    equal += want && i != j;
                    if (want != got && bad++ < 5)
                        fprintf(stderr, "  c%d row %d (%s) vs c%d row %d (%s): hash %s\n", i, r,
                                x ? x : "NULL", j, q, y ? y : "NULL", got ? "equal" : "differs");
                }
    CHECK_EQ_INT(bad, 0);
    CHECK(equal > 1000); /* the values meet across columns often */
    CHECK(pairs == (int64_t)NT * ROWS * NT * ROWS);
    /* rec_cell_eq is the same relation */
    bool eq;
    CHECK_EQ_INT(rec_cell_eq(&eq, &b->columns[0], 0, &b->columns[0], 0, &e), MCDC_OK);
    CHECK(eq);
    for (int i = 0; i < NT; i++)
        for (int r = 0; r < ROWS; r++) mcdc_free(text[i][r]);
    mcdc_batch_free(b);
}

/* Tier 2's entries: ordered by ordinal (NULL keys last, a key's first row
 * first, later rows of it marked), not moved when they come in order; the
 * lookup from the finger is the bisection's answer for any order of
 * lookups. */
TEST(reconcile_entries_order_and_merge_lookup) {
    enum { N = 2000 };
    rec_entry *e = mcdc_calloc(N, sizeof *e);
    CHECK(e != NULL);
    uint64_t seed = 99;
    int64_t nulls = 0;
    for (int64_t i = 0; i < N; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        e[i].seq = i;
        e[i].pend = -1;
        e[i].null_key = (seed >> 50) % 17 == 0;
        e[i].ord = e[i].null_key ? i : (int64_t)((seed >> 33) % 3000) - 1000; /* duplicates */
        nulls += e[i].null_key;
    }
    int64_t repeats = -1;
    int64_t n_ord = rec_entries_order(e, N, &repeats);
    CHECK_EQ_INT(n_ord, N - nulls);
    int64_t marked = 0;
    for (int64_t i = 1; i < N; i++) {
        if (i < n_ord) {
            CHECK(e[i - 1].ord < e[i].ord || (e[i - 1].ord == e[i].ord && e[i - 1].seq < e[i].seq));
            CHECK(e[i].seen == (e[i - 1].ord == e[i].ord));
            marked += e[i].seen;
        } else {
            CHECK(e[i].null_key);
            if (i > n_ord) CHECK(e[i - 1].seq < e[i].seq);
        }
    }
    CHECK(marked > 0 && !e[0].seen && repeats == marked);
    /* lookups: ascending (a merge), then random, against a linear search */
    int64_t finger = 0, steps = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t k = 0; k < 4000; k++) {
            int64_t v = pass == 0 ? k - 1200 : (int64_t)(((uint64_t)k * 2654435761u) % 4000) - 1200;
            int64_t want = -1;
            for (int64_t i = 0; i < n_ord && want < 0; i++)
                if (e[i].ord == v) want = i;
            CHECK_EQ_INT(rec_entries_find(e, n_ord, &finger, v), want);
            steps++;
        }
    }
    CHECK_EQ_INT(steps, 8000);
    CHECK_EQ_INT(rec_entries_find(e, 0, &finger, 5), -1);
    /* already in order: left as it is */
    rec_entry in[4] = {{.ord = 1, .seq = 0}, {.ord = 1, .seq = 1}, {.ord = 7, .seq = 2},
                       {.ord = 0, .seq = 3, .null_key = true}};
    CHECK_EQ_INT(rec_entries_order(in, 4, &repeats), 3);
    CHECK_EQ_INT(repeats, 1); /* key 1 twice */
    CHECK(in[0].seq == 0 && in[1].seq == 1 && in[2].seq == 2 && in[3].seq == 3);
    CHECK(!in[0].seen && in[1].seen && !in[2].seen);
    finger = 0;
    CHECK_EQ_INT(rec_entries_find(in, 3, &finger, 1), 0);
    CHECK_EQ_INT(rec_entries_find(in, 3, &finger, 7), 2);
    CHECK_EQ_INT(rec_entries_find(in, 3, &finger, 8), -1);
    mcdc_free(e);
}
