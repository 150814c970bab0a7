/* test_silver.c - silver's keys, ranks, rules and sorter (src/silver). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mcdc_silver.h"
#include "mcdc_tables.h"
#include "mcdc_test.h"

/* ---- keys ------------------------------------------------------------------------ */

static mcdc_schema *key_schema(void) {
    mcdc_schema *s;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_schema_create(&s, 3, &e);
    mcdc_schema_set(s, 0, "i", MCDC_TYPE_INT64, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 1, "t", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 2, "d", MCDC_TYPE_DECIMAL, 18, 2, 0, true, &e);
    return s;
}

/* The keys of rows (i, t) of one batch, encoded. */
typedef struct {
    bool i_null, t_null;
    int64_t i;
    const char *t;
    size_t t_len;
} krow;

static void encode_rows(const krow *rows, int n, mcdc_buf *out, size_t *off) {
    mcdc_schema *s = key_schema();
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_batch *b;
    mcdc_batch_create(&b, s, n, &e);
    for (int r = 0; r < n; r++) {
        if (rows[r].i_null) mcdc_col_append_null(&b->columns[0], &e);
        else mcdc_col_append_int(&b->columns[0], rows[r].i, &e);
        if (rows[r].t_null) mcdc_col_append_null(&b->columns[1], &e);
        else mcdc_col_append_bytes(&b->columns[1], rows[r].t, (int64_t)rows[r].t_len, &e);
        mcdc_col_append_null(&b->columns[2], &e);
    }
    mcdc_batch_seal(b, &e);
    const mcdc_column *cols[2] = {&b->columns[0], &b->columns[1]};
    for (int r = 0; r < n; r++) {
        off[r] = out->len;
        silver_key_append(out, cols, 2, r, &e);
    }
    off[n] = out->len;
    mcdc_batch_free(b);
    mcdc_schema_unref(s);
}

TEST(silver_keys_order_as_tuples_nulls_first_and_equal) {
    /* in the order the encodings must sort in */
    const krow rows[] = {
        {true, true, 0, NULL, 0},            /* (NULL, NULL) */
        {true, false, 0, "a", 1},            /* (NULL, 'a') */
        {false, true, INT64_MIN, NULL, 0},   /* (min, NULL) */
        {false, false, -5, "", 0},           /* (-5, '') */
        {false, false, -5, "\0", 1},         /* (-5, '\0'): after '' */
        {false, false, -5, "\0\0", 2},
        {false, false, -5, "\0a", 2},
        {false, false, -5, "a", 1},
        {false, false, -5, "ab", 2},         /* a prefix sorts first */
        {false, false, -1, "", 0},
        {false, false, 0, "zz", 2},
        {false, false, 7, "a", 1},
        {false, false, INT64_MAX, "", 0},
    };
    int n = (int)(sizeof rows / sizeof rows[0]);
    mcdc_buf b = {0};
    size_t off[32];
    encode_rows(rows, n, &b, off);
    const uint8_t *p = (const uint8_t *)b.data;
    for (int i = 0; i + 1 < n; i++) {
        int c = silver_key_cmp(p + off[i], off[i + 1] - off[i], p + off[i + 1], off[i + 2] - off[i + 1]);
        if (c >= 0) fprintf(stderr, "  keys %d and %d out of order\n", i, i + 1);
        CHECK(c < 0);
    }
    /* equal tuples (NULLs included) encode equally: the null-safe match */
    mcdc_buf b2 = {0};
    size_t off2[32];
    encode_rows(rows, n, &b2, off2);
    for (int i = 0; i < n; i++) {
        CHECK(silver_key_cmp(p + off[i], off[i + 1] - off[i], (const uint8_t *)b2.data + off2[i],
                             off2[i + 1] - off2[i]) == 0);
        CHECK(silver_hash(p + off[i], off[i + 1] - off[i]) ==
              silver_hash((const uint8_t *)b2.data + off2[i], off2[i + 1] - off2[i]));
    }
    mcdc_buf_free(&b);
    mcdc_buf_free(&b2);
}

static int sgn(int c) { return (c > 0) - (c < 0); }

/* silver_key_cmp_fast orders exactly as silver_key_cmp: random bytes over
 * a small alphabet (long equal prefixes), every length to 40, prefixes of
 * each other, and the one-integer keys with and without a rank. */
TEST(silver_key_cmp_fast_orders_as_silver_key_cmp) {
    uint64_t x = 0x9E3779B97F4A7C15ULL;
    uint8_t a[48], b[48];
    int64_t n_less = 0, n_eq = 0, n_more = 0;
    for (int it = 0; it < 200000; it++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t na = (size_t)(x % 41), nb = (size_t)((x >> 8) % 41);
        int alpha = (int)((x >> 16) % 3); /* 0: {0,1}  1: {0,0xFF}  2: any byte */
        for (size_t i = 0; i < 48; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            uint8_t v = alpha == 0 ? (uint8_t)(x & 1) : alpha == 1 ? (uint8_t)((x & 1) ? 0xFF : 0) : (uint8_t)x;
            a[i] = v;
            /* b: mostly a's bytes, so that prefixes agree far */
            b[i] = ((x >> 20) % 16 == 0) ? (uint8_t)(x >> 32) : v;
        }
        if (it % 4 == 0) memcpy(b, a, 48); /* one a prefix of the other, or equal */
        int want = sgn(silver_key_cmp(a, na, b, nb));
        int got = sgn(silver_key_cmp_fast(a, na, b, nb));
        if (want != got) fprintf(stderr, "  na %zu nb %zu: %d, fast %d\n", na, nb, want, got);
        CHECK_EQ_INT(got, want);
        CHECK_EQ_INT(sgn(silver_key_cmp_fast(b, nb, a, na)), -want);
        n_less += want < 0, n_eq += want == 0, n_more += want > 0;
    }
    CHECK(n_less > 1000 && n_eq > 1000 && n_more > 1000);
    /* edges: empty, equal, one byte apart at every position of 19 bytes */
    CHECK_EQ_INT(silver_key_cmp_fast(a, 0, b, 0), 0);
    CHECK(silver_key_cmp_fast(a, 0, b, 1) < 0 && silver_key_cmp_fast(a, 1, b, 0) > 0);
    for (size_t i = 0; i < 19; i++) {
        memset(a, 0x80, 19);
        memset(b, 0x80, 19);
        b[i] = 0x81;
        CHECK(silver_key_cmp_fast(a, 19, b, 19) < 0 && silver_key_cmp(a, 19, b, 19) < 0);
        CHECK(silver_key_cmp_fast(b, 19, a, 19) > 0);
        CHECK(silver_key_cmp_fast(a, 19, a, i) > 0 && silver_key_cmp_fast(a, i, a, 19) < 0);
    }
    /* encoded integer keys sort as the integers, near the sign and byte edges */
    const int64_t v[] = {INT64_MIN, INT64_MIN + 1, -65536, -256, -255, -1, 0, 1, 255, 256, 65535,
                         65536, 9999999, INT64_MAX - 1, INT64_MAX};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        for (size_t j = 0; j < sizeof v / sizeof v[0]; j++) {
            uint8_t p[9], q[9];
            uint64_t u = (uint64_t)v[i] ^ (1ULL << 63), w = (uint64_t)v[j] ^ (1ULL << 63);
            p[0] = q[0] = 1;
            for (int k = 0; k < 8; k++) {
                p[1 + k] = (uint8_t)(u >> (56 - 8 * k));
                q[1 + k] = (uint8_t)(w >> (56 - 8 * k));
            }
            CHECK_EQ_INT(sgn(silver_key_cmp_fast(p, 9, q, 9)), (i > j) - (i < j));
        }
}

TEST(silver_keys_of_other_types_keep_their_order) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_schema *s;
    mcdc_schema_create(&s, 3, &e);
    mcdc_schema_set(s, 0, "d", MCDC_TYPE_DECIMAL, 18, 2, 0, true, &e);
    mcdc_schema_set(s, 1, "f", MCDC_TYPE_DOUBLE, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 2, "x", MCDC_TYPE_BINARY, 0, 0, 0, true, &e);
    mcdc_batch *b;
    mcdc_batch_create(&b, s, 4, &e);
    const int64_t dec[] = {-250, -1, 0, 12345};
    const double dbl[] = {-1e300, -0.0, 0.0, 2.5};
    for (int r = 0; r < 4; r++) {
        mcdc_col_append_decimal(&b->columns[0], (uint64_t)dec[r], dec[r] < 0 ? -1 : 0, &e);
        mcdc_col_append_double(&b->columns[1], dbl[r], &e);
        uint8_t x[2] = {(uint8_t)r, 0};
        mcdc_col_append_bytes(&b->columns[2], x, 2, &e);
    }
    mcdc_batch_seal(b, &e);
    for (int k = 0; k < 3; k++) {
        mcdc_buf out = {0};
        size_t off[5];
        const mcdc_column *c = &b->columns[k];
        for (int r = 0; r < 4; r++) {
            off[r] = out.len;
            CHECK_EQ_INT(silver_key_append(&out, &c, 1, r, &e), MCDC_OK);
        }
        off[4] = out.len;
        const uint8_t *p = (const uint8_t *)out.data;
        for (int r = 0; r + 1 < 4; r++) {
            int cmp = silver_key_cmp(p + off[r], off[r + 1] - off[r], p + off[r + 1], off[r + 2] - off[r + 1]);
            /* -0 and 0 are one key */
            if (k == 1 && r == 1) CHECK(cmp == 0);
            else CHECK(cmp < 0);
        }
        mcdc_buf_free(&out);
    }
    mcdc_batch_free(b);
    mcdc_schema_unref(s);
}

/* ---- ranks and rules -------------------------------------------------------------- */

static silver_rank rk(const char *lsn, int cmd, const char *seq, int op) {
    silver_rank r;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = silver_rank_make(&r, lsn, strlen(lsn), cmd >= 0, cmd, seq, seq ? strlen(seq) : 0, op, &e);
    if (rc) fprintf(stderr, "  rank: %s\n", e.message);
    return r;
}

#define L1 "0x0000002A000000100001"
#define L2 "0x0000002A000000200001"
#define S1 "0x0000002A000000100002"
#define S2 "0x0000002A000000100003"

static int rcmp(silver_rank a, silver_rank b) { return memcmp(a.b, b.b, SILVER_RANK_BYTES); }

TEST(silver_rank_orders_by_lsn_command_seqval_operation) {
    /* the commit first */
    CHECK(rcmp(rk(L1, 9, S2, 4), rk(L2, 0, NULL, 1)) < 0);
    /* then _command_id, NULL lowest */
    CHECK(rcmp(rk(L1, 1, S2, 4), rk(L1, 2, S1, 1)) < 0);
    CHECK(rcmp(rk(L1, -1, S2, 4), rk(L1, 0, S1, 1)) < 0);
    /* then _seqval, NULL lowest (snapshot rows) */
    CHECK(rcmp(rk(L1, 1, S1, 4), rk(L1, 1, S2, 1)) < 0);
    CHECK(rcmp(rk(L1, -1, NULL, 0), rk(L1, -1, S1, 0)) < 0);
    /* an update's after image (4) outranks its before image (3) */
    CHECK(rcmp(rk(L1, 1, S1, 3), rk(L1, 1, S1, 4)) < 0);
    silver_rank r = rk(L2, 5, S1, 2);
    CHECK_EQ_INT(silver_rank_op(&r), 2);
    /* negative command ids (none in CDC, but the order holds) */
    CHECK(rcmp(rk(L1, INT32_MIN, S1, 2), rk(L1, 0, S1, 2)) < 0);
    /* what is not an LSN is refused */
    silver_rank x;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(silver_rank_make(&x, "0x12", 4, false, 0, NULL, 0, 2, &e), MCDC_E_CORRUPT);
    CHECK(strstr(e.message, "not an LSN") != NULL);
    CHECK_EQ_INT(silver_rank_make(&x, L1, 22, false, 0, NULL, 0, 7, &e), MCDC_E_CORRUPT);
}

TEST(silver_rules_delete_upsert_and_never_older) {
    uint8_t old[10], now[10];
    CHECK(silver_lsn_parse(old, L1, 22));
    CHECK(silver_lsn_parse(now, L2, 22));
    silver_rank del = rk(L2, 1, S1, 1), ins = rk(L2, 1, S1, 2), upd = rk(L2, 1, S1, 4),
                before = rk(L2, 1, S1, 3), snap = rk(L2, -1, NULL, 0);
    CHECK_EQ_INT(silver_decide(&del, true, old, false), SILVER_DELETE);
    CHECK_EQ_INT(silver_decide(&before, true, old, false), SILVER_DELETE); /* the key moved */
    CHECK_EQ_INT(silver_decide(&ins, true, old, false), SILVER_UPDATE);
    CHECK_EQ_INT(silver_decide(&upd, true, old, false), SILVER_UPDATE);
    CHECK_EQ_INT(silver_decide(&snap, true, old, false), SILVER_UPDATE);
    /* a change not newer than the row's own image changes nothing: reapply */
    CHECK_EQ_INT(silver_decide(&upd, true, now, false), SILVER_KEEP);
    CHECK_EQ_INT(silver_decide(&del, true, now, false), SILVER_KEEP);
    silver_rank older = rk(L1, 1, S1, 1);
    CHECK_EQ_INT(silver_decide(&older, true, now, false), SILVER_KEEP);
    /* a row without _start_lsn is never matched as older */
    CHECK_EQ_INT(silver_decide(&upd, false, old, false), SILVER_KEEP);
    /* no change: kept, but a rebuild deletes it */
    CHECK_EQ_INT(silver_decide(NULL, true, old, false), SILVER_KEEP);
    CHECK_EQ_INT(silver_decide(NULL, true, old, true), SILVER_DELETE);
    CHECK_EQ_INT(silver_decide(&upd, true, now, true), SILVER_KEEP);
    CHECK(silver_inserts(&ins) && silver_inserts(&upd) && silver_inserts(&snap));
    CHECK(!silver_inserts(&del) && !silver_inserts(&before));
    /* the synthetic delete of a chunk range */
    silver_rank gone;
    silver_rank_delete_at(&gone, now);
    CHECK_EQ_INT(silver_rank_op(&gone), 1);
    CHECK(rcmp(gone, rk(L2, -1, NULL, 1)) == 0);
    CHECK(rcmp(gone, rk(L2, 0, S1, 2)) < 0); /* any change of that commit outranks it */
    char text[23];
    silver_lsn_format(text, now);
    CHECK_EQ_STR(text, L2);
}

TEST(silver_ranges_find_the_chunk_of_a_key) {
    silver_range r[3] = {{false, true, 0, 10, {0}}, {true, true, 10, 20, {0}}, {true, false, 30, 0, {0}}};
    CHECK(silver_range_find(r, 3, INT64_MIN) == &r[0]);
    CHECK(silver_range_find(r, 3, 9) == &r[0]);
    CHECK(silver_range_find(r, 3, 10) == &r[1]);
    CHECK(silver_range_find(r, 3, 19) == &r[1]);
    CHECK(silver_range_find(r, 3, 20) == NULL); /* a gap: no chunk of this wave */
    CHECK(silver_range_find(r, 3, 30) == &r[2]);
    CHECK(silver_range_find(r, 3, INT64_MAX) == &r[2]);
    CHECK(silver_range_find(r + 1, 1, 5) == NULL);
}

TEST(silver_bloom_has_every_key_and_few_others) {
    enum { N = 20000 };
    uint64_t *h = malloc(N * sizeof *h);
    for (int i = 0; i < N; i++) {
        int64_t v = i * 7919LL;
        h[i] = silver_hash(&v, sizeof v);
    }
    silver_bloom b;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(silver_bloom_build(&b, h, N, &e), MCDC_OK);
    int missing = 0, false_pos = 0;
    for (int i = 0; i < N; i++) missing += !silver_bloom_may(&b, h[i]);
    for (int i = 0; i < N; i++) {
        int64_t v = i * 7919LL + 1;
        false_pos += silver_bloom_may(&b, silver_hash(&v, sizeof v));
    }
    CHECK_EQ_INT(missing, 0);
    CHECK(false_pos < N / 40); /* about 1% */
    silver_bloom_free(&b);
    free(h);
}

/* ---- the sorter --------------------------------------------------------------------- */

/* change rows: id, val, _start_lsn, _op, _cmd, _seq (tags apart) */
static mcdc_schema *change_schema(void) {
    mcdc_schema *s;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_schema_create(&s, 6, &e);
    mcdc_schema_set(s, 0, "id", MCDC_TYPE_INT32, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 1, "val", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 2, "_start_lsn", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 3, "_operation", MCDC_TYPE_INT32, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 4, "_command_id", MCDC_TYPE_INT32, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 5, "_seqval", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    return s;
}

static void lsn_text(char out[23], int64_t n) {
    snprintf(out, 23, "0x%020llX", (unsigned long long)n);
}

static void add_change(mcdc_batch *b, int id, const char *val, int64_t lsn, int op, int cmd,
                       int64_t seq) {
    mcdc_error e = MCDC_ERROR_INIT;
    char l[23], q[23];
    lsn_text(l, lsn);
    lsn_text(q, seq);
    mcdc_col_append_int(&b->columns[0], id, &e);
    mcdc_col_append_bytes(&b->columns[1], val, (int64_t)strlen(val), &e);
    mcdc_col_append_bytes(&b->columns[2], l, 22, &e);
    mcdc_col_append_int(&b->columns[3], op, &e);
    if (cmd < 0) mcdc_col_append_null(&b->columns[4], &e);
    else mcdc_col_append_int(&b->columns[4], cmd, &e);
    if (seq < 0) mcdc_col_append_null(&b->columns[5], &e);
    else mcdc_col_append_bytes(&b->columns[5], q, 22, &e);
}

static silver_sorter *new_sorter(mcdc_storage *st, mcdc_schema *s, bool ranked, uint32_t keep,
                                 int64_t mem) {
    static const int32_t key[1] = {0};
    silver_sorter_cfg c = {.schema = s, .key_cols = key, .n_keys = 1, .ranked = ranked,
                           .lsn_col = 2, .op_col = 3, .cmd_col = 4, .seq_col = 5,
                           .keep_tags = keep, .memory_bytes = mem, .spill = st,
                           .spill_prefix = "_mssql_cdc_spill/t-"};
    silver_sorter *x = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = silver_sorter_create(&x, &c, &e);
    if (rc) fprintf(stderr, "  sorter: %s\n", e.message);
    return x;
}

static int32_t i32_at(const mcdc_batch *b, int c, int64_t r) {
    int32_t v;
    memcpy(&v, b->columns[c].values + r * 4, 4);
    return v;
}

/* Many rows per key, added out of order, with a budget that spills several
 * runs: each key comes out once, its latest row, with every row's tags. */
static void sorter_case(int64_t mem, bool expect_runs) {
    mcdc_storage_mem *m;
    mcdc_storage *st;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage_mem_create(&m, "sorter", &e);
    mcdc_storage_mem_open(&st, m, "silver", &e);
    mcdc_schema *s = change_schema();
    silver_sorter *x = new_sorter(st, s, true, SILVER_TAG_BASE | SILVER_TAG_WAVE, mem);
    enum { KEYS = 30000, ROUNDS = 4 };
    uint8_t lo[10], want_lo[10], none[10];
    memset(none, 0xFF, 10);
    silver_sorter_min_lsn(x, lo);
    CHECK(memcmp(lo, none, 10) == 0); /* no rows yet */
    for (int round = 0; round < ROUNDS; round++) {
        mcdc_batch *b;
        mcdc_batch_create(&b, s, KEYS, &e);
        static uint32_t tags[KEYS * 2];
        for (int i = 0; i < KEYS; i++) {
            int id = (i * 7 + round * 13) % KEYS;
            /* round 2 is the latest for even keys, round 1 for odd ones (lsn);
             * within a round ops 3 and 4 of the same command: 4 wins */
            int64_t lsn = 100 + (id % 2 ? (round == 1 ? 50 : round) : (round == 2 ? 50 : round));
            int tag = id % 5 == 0 ? SILVER_TAG_LATER : round == 3 && id % 7 == 0 ? SILVER_TAG_WAVE
                                                                                 : SILVER_TAG_BASE;
            if (id % 5 == 0 && round == 3) tag = SILVER_TAG_LATER; /* only LATER rows: left out */
            char val[32];
            snprintf(val, sizeof val, "r%d-%d", round, id);
            add_change(b, id, val, lsn, 3, 1, 7);
            add_change(b, id, val, lsn, 4, 1, 7);
            tags[2 * i] = tags[2 * i + 1] = (uint32_t)tag;
        }
        mcdc_batch_seal(b, &e);
        if (round % 2) {
            CHECK_EQ_INT(silver_sorter_add(x, b, NULL, 0, tags, &e), MCDC_OK);
            mcdc_batch_free(b);
        } else { /* the batch handed over */
            CHECK_EQ_INT(silver_sorter_add_owned(x, b, tags, &e), MCDC_OK);
        }
    }
    CHECK_EQ_INT(silver_sorter_rows(x), (int64_t)KEYS * ROUNDS * 2);
    CHECK_EQ_INT(silver_sorter_finish(x, &e), MCDC_OK);
    /* the smallest LSN added: round 0's 100 (its rows all lose to later ones) */
    char lt[23];
    lsn_text(lt, 100);
    CHECK(silver_lsn_parse(want_lo, lt, 22));
    silver_sorter_min_lsn(x, lo);
    CHECK(memcmp(lo, want_lo, 10) == 0);
    CHECK(expect_runs ? silver_sorter_runs(x) >= 2 : silver_sorter_runs(x) == 0);
    for (int pass = 0; pass < 2; pass++) {
        CHECK_EQ_INT(silver_sorter_rewind(x, pass == 1, &e), MCDC_OK);
        const silver_chunk *ch;
        int64_t seen = 0, bad = 0, last = -1;
        while (silver_sorter_next(x, &ch, &e) == MCDC_OK && ch) {
            CHECK(pass == 1 ? ch->rows == NULL : ch->rows && ch->rows->rows == ch->n);
            for (int64_t r = 0; r < ch->n; r++) {
                int id = pass == 0 ? i32_at(ch->rows, 0, r) : -1;
                if (pass == 0) {
                    bad += id <= last;
                    last = id;
                    char want[32];
                    snprintf(want, sizeof want, "r%d-%d", id % 2 ? 1 : 2, id);
                    const mcdc_column *v = &ch->rows->columns[1];
                    bad += (size_t)(v->offsets[r + 1] - v->offsets[r]) != strlen(want) ||
                           memcmp(v->data + v->offsets[r], want, strlen(want)) != 0;
                    bad += i32_at(ch->rows, 3, r) != 4;
                    bad += id % 5 == 0; /* LATER only: never out */
                    bool wave = id % 7 == 0;
                    bad += ((ch->tags[r] & SILVER_TAG_WAVE) != 0) != wave;
                }
                bad += silver_rank_op(&ch->rank[r]) != 4;
                seen++;
            }
        }
        int64_t want = KEYS - KEYS / 5;
        CHECK_EQ_INT(seen, want);
        CHECK_EQ_INT(bad, 0);
    }
    /* deferred rows: chunks without rows; about a third of each taken,
     * two columns in another order, straight from where they are held
     * (memory and runs alike) */
    mcdc_schema *two;
    mcdc_schema_create(&two, 2, &e);
    mcdc_schema_set(two, 0, "val", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    mcdc_schema_set(two, 1, "id", MCDC_TYPE_INT32, 0, 0, 0, true, &e);
    static const int32_t col_of[2] = {1, 0};
    CHECK_EQ_INT(silver_sorter_rewind(x, false, &e), MCDC_OK);
    silver_sorter_defer_rows(x, true);
    const silver_chunk *ch;
    int64_t taken = 0, bad = 0, chunks = 0, last = -1;
    static int32_t sel[SILVER_BATCH_ROWS];
    while (silver_sorter_next(x, &ch, &e) == MCDC_OK && ch) {
        CHECK(ch->rows == NULL);
        int32_t n = 0;
        for (int32_t r = 0; r < ch->n; r++) /* irregular gaps */
            if (((uint32_t)(r + chunks) * 2654435761u >> 13) % 3 == 0) sel[n++] = r;
        mcdc_batch *t;
        mcdc_batch_create(&t, two, n ? n : 1, &e);
        CHECK_EQ_INT(silver_sorter_take(x, t, col_of, sel, n, &e), MCDC_OK);
        CHECK_EQ_INT(mcdc_batch_seal(t, &e), MCDC_OK);
        CHECK_EQ_INT(t->rows, n);
        for (int32_t r = 0; r < n; r++) {
            int id = i32_at(t, 1, r);
            bad += id <= last;
            last = id;
            char want[32];
            snprintf(want, sizeof want, "r%d-%d", id % 2 ? 1 : 2, id);
            const mcdc_column *v = &t->columns[0];
            bad += (size_t)(v->offsets[r + 1] - v->offsets[r]) != strlen(want) ||
                   memcmp(v->data + v->offsets[r], want, strlen(want)) != 0;
        }
        taken += n;
        chunks++;
        mcdc_batch_free(t);
    }
    CHECK(taken > 0 && chunks > 0);
    CHECK_EQ_INT(bad, 0);
    mcdc_schema_unref(two);
    silver_sorter_free(x);
    /* its runs are gone with it */
    mcdc_storage_listing l = {0};
    mcdc_storage_list(st, "_mssql_cdc_spill/", &l, &e);
    CHECK_EQ_INT(l.count, 0);
    mcdc_storage_listing_free(&l);
    mcdc_schema_unref(s);
    mcdc_storage_free(st);
    mcdc_storage_mem_release(m);
}

TEST(silver_sorter_keeps_the_latest_row_of_each_key_in_memory) { sorter_case(0, false); }
TEST(silver_sorter_keeps_the_latest_row_of_each_key_over_spilled_runs) {
    sorter_case(SILVER_SORT_BYTES_MIN, true);
}

/* Keys alike in their first 16 bytes and more (the sort's prefix): every
 * row out in key order, rows of one key in the order they came. */
TEST(silver_sorter_orders_keys_alike_past_their_prefix) {
    mcdc_storage_mem *m;
    mcdc_storage *st;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage_mem_create(&m, "sorter3", &e);
    mcdc_storage_mem_open(&st, m, NULL, &e);
    mcdc_schema *s = change_schema();
    static const int32_t key[1] = {1};
    silver_sorter_cfg c = {.schema = s, .key_cols = key, .n_keys = 1, .spill = st,
                           .spill_prefix = "_mssql_cdc_spill/t-"};
    silver_sorter *x = NULL;
    CHECK_EQ_INT(silver_sorter_create(&x, &c, &e), MCDC_OK);
    enum { N = 20000, KEYS = 3000 };
    mcdc_batch *b;
    mcdc_batch_create(&b, s, N, &e);
    for (int i = 0; i < N; i++) {
        char v[64];
        /* lengths differ too: a shorter key a prefix of longer ones */
        snprintf(v, sizeof v, "a-prefix-all-rows-share-%d", (i * 7919) % KEYS);
        add_change(b, i, v, 5, 2, 0, 1);
    }
    mcdc_batch_seal(b, &e);
    CHECK_EQ_INT(silver_sorter_add(x, b, NULL, 0, NULL, &e), MCDC_OK);
    CHECK_EQ_INT(silver_sorter_finish(x, &e), MCDC_OK);
    CHECK_EQ_INT(silver_sorter_runs(x), 0);
    CHECK_EQ_INT(silver_sorter_rewind(x, false, &e), MCDC_OK);
    const silver_chunk *ch;
    int64_t seen = 0, bad = 0, last_id = -1;
    mcdc_buf last = {0};
    while (silver_sorter_next(x, &ch, &e) == MCDC_OK && ch) {
        for (int64_t r = 0; r < ch->n; r++) {
            int id = i32_at(ch->rows, 0, r);
            int cmp = seen ? silver_key_cmp((const uint8_t *)last.data, last.len, ch->key[r], ch->key_len[r]) : -1;
            bad += cmp > 0;
            bad += cmp == 0 && id <= last_id; /* equal keys keep the order they came in */
            last_id = id;
            mcdc_buf_reset(&last);
            mcdc_buf_append(&last, ch->key[r], ch->key_len[r], &e);
            seen++;
        }
    }
    CHECK_EQ_INT(seen, N);
    CHECK_EQ_INT(bad, 0);
    mcdc_buf_free(&last);
    mcdc_batch_free(b);
    silver_sorter_free(x);
    mcdc_schema_unref(s);
    mcdc_storage_free(st);
    mcdc_storage_mem_release(m);
}

/* ---- keys that are not unique -------------------------------------------------------- */

/* An in-memory storage and the change rows' schema. */
typedef struct {
    mcdc_storage_mem *m;
    mcdc_storage *st;
    mcdc_schema *s;
} unique_env;

static unique_env unique_open(void) {
    unique_env u = {0};
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage_mem_create(&u.m, "unique", &e);
    mcdc_storage_mem_open(&u.st, u.m, "silver", &e);
    u.s = change_schema();
    return u;
}

static void unique_close(unique_env *u) {
    mcdc_schema_unref(u->s);
    mcdc_storage_free(u->st);
    mcdc_storage_mem_release(u->m);
}

static silver_sorter *unique_sorter(mcdc_storage *st, mcdc_schema *s, bool history, int64_t mem) {
    static const int32_t key[1] = {0};
    silver_sorter_cfg c = {.schema = s, .key_cols = key, .n_keys = 1, .ranked = true,
                           .history = history, .lsn_col = 2, .op_col = 3, .cmd_col = 4,
                           .seq_col = 5, .unique_keys = true, .memory_bytes = mem, .spill = st,
                           .spill_prefix = "_mssql_cdc_spill/t-"};
    silver_sorter *x = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(silver_sorter_create(&x, &c, &e), MCDC_OK);
    return x;
}

static mcdc_batch *unique_batch(const unique_env *u) {
    mcdc_batch *b = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_batch_create(&b, u->s, 64, &e);
    return b;
}

/* b's rows (b sealed and freed here) through a sorter in memory, finished
 * and read: the first status that is not MCDC_OK, its message in err. */
static int sort_all(const unique_env *u, bool history, mcdc_batch *b, mcdc_error *err) {
    silver_sorter *x = unique_sorter(u->st, u->s, history, 0);
    mcdc_batch_seal(b, err);
    int rc = silver_sorter_add(x, b, NULL, 0, NULL, err);
    mcdc_batch_free(b);
    if (rc == MCDC_OK) rc = silver_sorter_finish(x, err);
    if (rc == MCDC_OK) rc = silver_sorter_rewind(x, false, err);
    const silver_chunk *ch;
    while (rc == MCDC_OK && (rc = silver_sorter_next(x, &ch, err)) == MCDC_OK && ch) {}
    silver_sorter_free(x);
    return rc;
}

#define REPAIR_SEQ ((int64_t)0x7FFFFFFFFFFFFFFFLL)

TEST(silver_sorter_lets_rows_of_one_key_that_prove_nothing_through) {
    unique_env u = unique_open();
    mcdc_error e = MCDC_ERROR_INIT;
    for (int history = 0; history < 2; history++) {
        mcdc_batch *b = unique_batch(&u);
        add_change(b, 1, "before", 200, 3, 1, 7); /* an update: its 3 and 4 share a rank but op */
        add_change(b, 1, "after", 200, 4, 1, 7);
        add_change(b, 2, "a", 200, 2, 1, 1);      /* insert, delete, insert in one transaction */
        add_change(b, 2, "", 200, 1, 2, 2);
        add_change(b, 2, "b", 200, 2, 3, 3);
        add_change(b, 3, "snap", 150, 0, -1, -1); /* a snapshot row and an insert at its LSN */
        add_change(b, 3, "ins", 150, 2, 1, 1);
        add_change(b, 4, "r1", 300, 4, 2147483647, REPAIR_SEQ); /* two repairs at one L */
        add_change(b, 4, "r2", 300, 4, 2147483647, REPAIR_SEQ);
        add_change(b, 5, "x", 200, 2, 1, 4);      /* an insert, a delete of another */
        add_change(b, 5, "", 205, 1, 1, 1);       /* transaction, an insert of a third */
        add_change(b, 5, "y", 210, 2, 1, 4);
        add_change(b, 6, "s1", 150, 0, -1, -1);   /* a snapshot's two rows of a key that a */
        add_change(b, 6, "s2", 150, 0, -1, -1);   /* later change outranks (read twice while */
        add_change(b, 6, "u", 220, 4, 1, 9);      /* it moved between ranges) */
        add_change(b, 7, "old", 100, 1, 1, 1);    /* a key update: delete 7, insert 8 */
        add_change(b, 8, "new", 100, 2, 1, 1);
        add_change(b, 9, "upd", 100, 4, 1, 2);    /* as the simulator's bulk loads write: an */
        add_change(b, 9, "ins", 100, 2, 1, 3);    /* update of a key before its insert */
        add_change(b, 10, "dup", 100, 2, 1, 5);   /* one change written twice */
        add_change(b, 10, "dup", 100, 2, 1, 5);
        CHECK_EQ_INT(sort_all(&u, history, b, &e), MCDC_OK);
    }
    unique_close(&u);
}

TEST(silver_sorter_refuses_what_proves_a_key_not_unique) {
    unique_env u = unique_open();
    mcdc_error e = MCDC_ERROR_INIT;
    for (int history = 0; history < 2; history++) {
        /* two snapshot rows of id 4 at one LSN, the latest of their key */
        mcdc_batch *b = unique_batch(&u);
        add_change(b, 3, "c", 150, 0, -1, -1);
        add_change(b, 4, "a", 150, 0, -1, -1);
        add_change(b, 5, "d", 150, 0, -1, -1);
        add_change(b, 4, "b", 150, 0, -1, -1);
        CHECK_EQ_INT(sort_all(&u, history, b, &e), MCDC_E_NOT_UNIQUE);
        CHECK(strstr(e.message, "key (id) is not unique") && strstr(e.message, "id = 4") &&
              strstr(e.message, "two snapshot rows") && strstr(e.message, "0x00000000000000000096") &&
              strstr(e.message, "--keys"));
        /* two inserts of id 9 in one transaction, a row of another key between */
        mcdc_error_clear(&e);
        b = unique_batch(&u);
        add_change(b, 9, "one", 400, 2, 1, 1);
        add_change(b, 8, "between", 400, 2, 1, 2);
        add_change(b, 9, "two", 400, 2, 1, 4);
        CHECK_EQ_INT(sort_all(&u, history, b, &e), MCDC_E_NOT_UNIQUE);
        CHECK(strstr(e.message, "two inserts of id = 9 (the later at LSN 0x00000000000000000190)"));
        mcdc_error_clear(&e);
        /* two inserts of id 5 in two transactions, nothing of the key between */
        b = unique_batch(&u);
        add_change(b, 5, "x", 200, 2, 1, 4);
        add_change(b, 5, "y", 210, 2, 1, 4);
        CHECK_EQ_INT(sort_all(&u, history, b, &e), MCDC_E_NOT_UNIQUE);
        CHECK(strstr(e.message, "two inserts of id = 5 (the later at LSN 0x000000000000000000D2)"));
        mcdc_error_clear(&e);
    }
    unique_close(&u);
}

/* A snapshot too large for the budget spills runs; the two rows of a key
 * in two runs meet only when the runs are read back (the merge's read) and
 * are refused there, unless a later change of the key outranks them; a
 * keys-only read (no rows to name) lets them through. */
TEST(silver_sorter_refuses_a_snapshot_tie_across_spilled_runs) {
    unique_env u = unique_open();
    mcdc_error e = MCDC_ERROR_INIT;
    enum { N = 40000 };
    for (int later = 0; later < 2; later++) {
        for (int history = 0; history < 2; history++) {
            silver_sorter *x = unique_sorter(u.st, u.s, history, SILVER_SORT_BYTES_MIN);
            int rc = MCDC_OK;
            for (int part = 0; part < 2 && rc == MCDC_OK; part++) {
                mcdc_batch *b;
                mcdc_batch_create(&b, u.s, N + 2, &e);
                for (int i = 0; i < N; i++) add_change(b, part * N + i, "row", 150, 0, -1, -1);
                if (part == 1) add_change(b, 123, "again", 150, 0, -1, -1);
                if (part == 1 && later) add_change(b, 123, "later", 500, 4, 1, 1);
                mcdc_batch_seal(b, &e);
                rc = silver_sorter_add(x, b, NULL, 0, NULL, &e);
                mcdc_batch_free(b);
            }
            CHECK_EQ_INT(rc, MCDC_OK);
            CHECK_EQ_INT(silver_sorter_finish(x, &e), MCDC_OK);
            CHECK(silver_sorter_runs(x) >= 2);
            const silver_chunk *ch;
            CHECK_EQ_INT(silver_sorter_rewind(x, true, &e), MCDC_OK);
            while ((rc = silver_sorter_next(x, &ch, &e)) == MCDC_OK && ch) {}
            CHECK_EQ_INT(rc, MCDC_OK);
            CHECK_EQ_INT(silver_sorter_rewind(x, false, &e), MCDC_OK);
            while ((rc = silver_sorter_next(x, &ch, &e)) == MCDC_OK && ch) {}
            CHECK_EQ_INT(rc, later ? MCDC_OK : MCDC_E_NOT_UNIQUE);
            if (!later) CHECK(strstr(e.message, "two snapshot rows of id = 123"));
            mcdc_error_clear(&e);
            silver_sorter_free(x);
        }
    }
    unique_close(&u);
}

/* Many ranks of one key (past the prefix: by whole sort keys, a long run and
 * a short one): the latest wins. */
TEST(silver_sorter_ranks_many_rows_of_one_key) {
    mcdc_storage_mem *m;
    mcdc_storage *st;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage_mem_create(&m, "sorter4", &e);
    mcdc_storage_mem_open(&st, m, NULL, &e);
    mcdc_schema *s = change_schema();
    silver_sorter *x = new_sorter(st, s, true, 0, 0);
    mcdc_batch *b;
    mcdc_batch_create(&b, s, 64, &e);
    for (int j = 0; j < 40; j++) {
        char v[16];
        int64_t lsn = 1000 + (j * 17) % 40; /* 1039 at j = 23 */
        snprintf(v, sizeof v, "k5-%lld", (long long)lsn);
        add_change(b, 5, v, lsn, 2, 0, 1);
        if (j < 10) {
            snprintf(v, sizeof v, "k6-%lld", (long long)(2000 + (j * 3) % 10));
            add_change(b, 6, v, 2000 + (j * 3) % 10, 2, 0, 1);
        }
    }
    mcdc_batch_seal(b, &e);
    CHECK_EQ_INT(silver_sorter_add(x, b, NULL, 0, NULL, &e), MCDC_OK);
    CHECK_EQ_INT(silver_sorter_finish(x, &e), MCDC_OK);
    CHECK_EQ_INT(silver_sorter_rewind(x, false, &e), MCDC_OK);
    const silver_chunk *ch;
    CHECK_EQ_INT(silver_sorter_next(x, &ch, &e), MCDC_OK);
    CHECK(ch != NULL && ch->n == 2);
    if (ch && ch->n == 2) {
        const mcdc_column *v = &ch->rows->columns[1];
        CHECK_EQ_INT(i32_at(ch->rows, 0, 0), 5);
        CHECK(v->offsets[1] - v->offsets[0] == 7 && memcmp(v->data + v->offsets[0], "k5-1039", 7) == 0);
        CHECK_EQ_INT(i32_at(ch->rows, 0, 1), 6);
        CHECK(v->offsets[2] - v->offsets[1] == 7 && memcmp(v->data + v->offsets[1], "k6-2009", 7) == 0);
    }
    CHECK_EQ_INT(silver_sorter_next(x, &ch, &e), MCDC_OK);
    CHECK(ch == NULL);
    mcdc_batch_free(b);
    silver_sorter_free(x);
    mcdc_schema_unref(s);
    mcdc_storage_free(st);
    mcdc_storage_mem_release(m);
}

/* Keys of every length around the sort's 16-byte prefix, two of each
 * length one byte apart at the end: one row out per key (the cut tells keys
 * apart by their prefixes up to 16 bytes), its latest. */
TEST(silver_sorter_cuts_keys_of_every_short_length) {
    mcdc_storage_mem *m;
    mcdc_storage *st;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage_mem_create(&m, "sorter5", &e);
    mcdc_storage_mem_open(&st, m, NULL, &e);
    mcdc_schema *s = change_schema();
    static const int32_t key[1] = {1};
    silver_sorter_cfg c = {.schema = s, .key_cols = key, .n_keys = 1, .ranked = true,
                           .lsn_col = 2, .op_col = 3, .cmd_col = 4, .seq_col = 5, .spill = st,
                           .spill_prefix = "_mssql_cdc_spill/t-"};
    silver_sorter *x = NULL;
    CHECK_EQ_INT(silver_sorter_create(&x, &c, &e), MCDC_OK);
    enum { LENS = 21 };
    mcdc_batch *b;
    mcdc_batch_create(&b, s, LENS * 6, &e);
    static const int lsns[3] = {10, 30, 20};
    for (int r = 0; r < 3; r++)
        for (int l = 0; l < LENS; l++)
            for (int z = 0; z < (l ? 2 : 1); z++) {
                /* x...xa and x...xb: of one length, next to each other in key order */
                char v[32];
                memset(v, 'x', (size_t)l);
                if (l) v[l - 1] = z ? 'b' : 'a';
                v[l] = 0;
                add_change(b, lsns[r], v, lsns[r], 2, 0, 1);
            }
    mcdc_batch_seal(b, &e);
    CHECK_EQ_INT(silver_sorter_add(x, b, NULL, 0, NULL, &e), MCDC_OK);
    CHECK_EQ_INT(silver_sorter_finish(x, &e), MCDC_OK);
    CHECK_EQ_INT(silver_sorter_rewind(x, false, &e), MCDC_OK);
    const silver_chunk *ch;
    int64_t seen = 0, bad = 0;
    while (silver_sorter_next(x, &ch, &e) == MCDC_OK && ch)
        for (int64_t r = 0; r < ch->n; r++) {
            bad += r > 0 && silver_key_cmp(ch->key[r - 1], ch->key_len[r - 1], ch->key[r], ch->key_len[r]) >= 0;
            bad += i32_at(ch->rows, 0, r) != 30;
            seen++;
        }
    CHECK_EQ_INT(seen, 2 * LENS - 1);
    CHECK_EQ_INT(bad, 0);
    mcdc_batch_free(b);
    silver_sorter_free(x);
    mcdc_schema_unref(s);
    mcdc_storage_free(st);
    mcdc_storage_mem_release(m);
}

TEST(silver_sorter_unranked_keeps_every_row_in_key_order) {
    mcdc_storage_mem *m;
    mcdc_storage *st;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage_mem_create(&m, "sorter2", &e);
    mcdc_storage_mem_open(&st, m, NULL, &e);
    mcdc_schema *s = change_schema();
    silver_sorter *x = new_sorter(st, s, false, 0, SILVER_SORT_BYTES_MIN);
    enum { N = 50000 };
    mcdc_batch *b;
    mcdc_batch_create(&b, s, N, &e);
    for (int i = 0; i < N; i++) add_change(b, (i * 31) % 1000, "v", 5, 2, 0, 1);
    mcdc_batch_seal(b, &e);
    int32_t *pick = malloc(N * sizeof *pick);
    int n = 0;
    for (int i = 0; i < N; i += 2) pick[n++] = i; /* half the rows */
    /* in parts: the budget is checked after each, so several runs spill */
    for (int k = 0; k < 8; k++)
        CHECK_EQ_INT(silver_sorter_add(x, b, pick + k * (n / 8), k < 7 ? n / 8 : n - 7 * (n / 8), NULL, &e), MCDC_OK);
    CHECK_EQ_INT(silver_sorter_finish(x, &e), MCDC_OK);
    CHECK(silver_sorter_runs(x) >= 2);
    CHECK_EQ_INT(silver_sorter_rewind(x, false, &e), MCDC_OK);
    const silver_chunk *ch;
    int64_t seen = 0, disorder = 0, last = -1;
    while (silver_sorter_next(x, &ch, &e) == MCDC_OK && ch) {
        for (int64_t r = 0; r < ch->n; r++) {
            int id = i32_at(ch->rows, 0, r);
            disorder += id < last;
            last = id;
            seen++;
        }
    }
    CHECK_EQ_INT(seen, n);
    CHECK_EQ_INT(disorder, 0);
    free(pick);
    mcdc_batch_free(b);
    silver_sorter_free(x);
    mcdc_schema_unref(s);
    mcdc_storage_free(st);
    mcdc_storage_mem_release(m);
}

/* More runs than are read at once (SILVER_RUNS_MAX): the newest are merged
 * into one and spilling goes on. Each key's rows are spread over every part, its
 * latest in any of them; the tag kept comes only with the last part, so a
 * merge that left out keys by their tags so far would hand out an older
 * row. The rank-only columns (held_cols) are not held. */
/* Rows a replayed sorter reads again: batch i of `batches` (ids ascending
 * from i * rows, two apart; `swap`: batch 2's first two rows swapped, out of
 * order; `alter`: batch 3 gives another key on its replay) */
typedef struct {
    mcdc_schema *s;
    int next, batches, rows;
    bool swap, alter, short_by_one, all_kept;
    int replays;
    uint32_t tags[4096];
} replay_src;

static mcdc_batch *replay_batch(replay_src *r, int i, bool again) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_batch *b;
    mcdc_batch_create(&b, r->s, r->rows, &e);
    for (int j = 0; j < r->rows; j++) {
        int k = j;
        if (r->swap && i == 2 && j < 2) k = 1 - j;
        int id = 2 * (i * r->rows + k);
        if (again && r->alter && i == 3 && j == 5) id++; /* still in order, another key */
        char val[32];
        snprintf(val, sizeof val, "v%d", id);
        add_change(b, id, val, 100, 0, -1, -1);
        /* a key of LATER rows only is left out */
        r->tags[j] = id % 9 == 0 && !r->all_kept ? SILVER_TAG_LATER : SILVER_TAG_BASE;
    }
    mcdc_batch_seal(b, &e);
    return b;
}

static int replay_fn(void *ctx, bool restart, mcdc_batch **out, const uint32_t **tags, mcdc_error *err) {
    (void)err;
    replay_src *r = ctx;
    if (restart) r->next = 0, r->replays++;
    int last = r->batches - (r->short_by_one ? 1 : 0);
    *out = r->next < last ? replay_batch(r, r->next++, true) : NULL;
    *tags = r->tags;
    return MCDC_OK;
}

/* Reads every key out (keys_only or not): the keys, ascending, and their
 * values right; the rows read in *rows. */
static int replay_drain(silver_sorter *x, bool keys_only, bool all_kept, int64_t *rows, int64_t *bad,
                        mcdc_error *e) {
    *rows = *bad = 0;
    int rc = silver_sorter_rewind(x, keys_only, e);
    const silver_chunk *ch = NULL;
    int64_t last = -1;
    while (rc == MCDC_OK && (rc = silver_sorter_next(x, &ch, e)) == MCDC_OK && ch) {
        CHECK(keys_only ? ch->rows == NULL : ch->rows && ch->rows->rows == ch->n);
        for (int64_t i = 0; !keys_only && i < ch->n; i++) {
            int id = i32_at(ch->rows, 0, i);
            char want[32];
            snprintf(want, sizeof want, "v%d", id);
            const mcdc_column *v = &ch->rows->columns[1];
            *bad += id <= last || (id % 9 == 0 && !all_kept) || id % 2 != 0;
            *bad += (size_t)(v->offsets[i + 1] - v->offsets[i]) != strlen(want) ||
                    memcmp(v->data + v->offsets[i], want, strlen(want)) != 0;
            *bad += ch->tags[i] != SILVER_TAG_BASE;
            last = id;
        }
        *rows += ch->n;
    }
    return rc;
}

/* A sorter whose rows can be read again holds none of them: rows added in
 * key order are checked, counted and let go, and reading replays them,
 * checked again (order, count, keys). Rows out of order, or a key twice,
 * are refused as they come (MCDC_E_CANCELLED, replay_broken): the caller
 * sorts them instead, which the same rows without a replay show. */
TEST(silver_sorter_replays_rows_in_key_order_and_sorts_them_otherwise) {
    mcdc_storage_mem *m;
    mcdc_storage *st;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage_mem_create(&m, "sorter", &e);
    mcdc_storage_mem_open(&st, m, "silver", &e);
    mcdc_schema *s = change_schema();
    enum { BATCHES = 6, ROWS = 4000 };
    int64_t some = 0;
    for (int id = 0; id < 2 * BATCHES * ROWS; id += 2) some += id % 9 != 0;
    /* in order; swapped; altered on replay; a batch short; in order, every
     * key kept (each batch is a chunk as it is) */
    for (int c = 0; c < 5; c++) {
        replay_src r = {.s = s, .batches = BATCHES, .rows = ROWS, .swap = c == 1, .alter = c == 2,
                        .short_by_one = c == 3, .all_kept = c == 4};
        int64_t want = c == 4 ? BATCHES * ROWS : some;
        /* a budget far below the rows: they would spill */
        silver_sorter *x = new_sorter(st, s, true, SILVER_TAG_BASE, 2 * 1024 * 1024);
        silver_sorter_set_replay(x, replay_fn, &r);
        int rc = MCDC_OK;
        for (int i = 0; rc == MCDC_OK && i < BATCHES; i++) {
            mcdc_batch *b = replay_batch(&r, i, false);
            if (i % 2) {
                rc = silver_sorter_add(x, b, NULL, 0, r.tags, &e);
                mcdc_batch_free(b);
            } else {
                rc = silver_sorter_add_owned(x, b, r.tags, &e);
            }
        }
        if (c == 1) { /* refused at the swapped row */
            CHECK_EQ_INT(rc, MCDC_E_CANCELLED);
            CHECK(silver_sorter_replay_broken(x));
            silver_sorter_free(x);
            /* the same rows sorted: every key, in order */
            x = new_sorter(st, s, true, SILVER_TAG_BASE, 2 * 1024 * 1024);
            for (int i = 0; i < BATCHES; i++)
                CHECK_EQ_INT(silver_sorter_add_owned(x, replay_batch(&r, i, false), r.tags, &e), MCDC_OK);
            CHECK_EQ_INT(silver_sorter_finish(x, &e), MCDC_OK);
            CHECK(!silver_sorter_replays(x));
            int64_t rows, bad;
            CHECK_EQ_INT(replay_drain(x, false, r.all_kept, &rows, &bad, &e), MCDC_OK);
            CHECK_EQ_INT(rows, want);
            CHECK_EQ_INT(bad, 0);
            silver_sorter_free(x);
            continue;
        }
        CHECK_EQ_INT(rc, MCDC_OK);
        CHECK_EQ_INT(silver_sorter_rows(x), (int64_t)BATCHES * ROWS);
        CHECK_EQ_INT(silver_sorter_finish(x, &e), MCDC_OK);
        CHECK(silver_sorter_replays(x));
        CHECK_EQ_INT(silver_sorter_runs(x), 0);
        CHECK_EQ_INT(silver_sorter_held_max(x), 0);
        int64_t rows = 0, bad = 0;
        rc = replay_drain(x, false, r.all_kept, &rows, &bad, &e);
        if (c == 2 || c == 3) { /* the replay is not what was added */
            CHECK_EQ_INT(rc, MCDC_E_CORRUPT);
            CHECK(strstr(e.message, c == 2 ? "other keys" : "another row count") != NULL);
            silver_sorter_free(x);
            continue;
        }
        CHECK_EQ_INT(rc, MCDC_OK);
        CHECK_EQ_INT(rows, want);
        CHECK_EQ_INT(bad, 0);
        /* again, keys only, then rows again: each a replay from the start */
        CHECK_EQ_INT(replay_drain(x, true, r.all_kept, &rows, &bad, &e), MCDC_OK);
        CHECK_EQ_INT(rows, want);
        CHECK_EQ_INT(replay_drain(x, false, r.all_kept, &rows, &bad, &e), MCDC_OK);
        CHECK_EQ_INT(rows, want);
        CHECK_EQ_INT(bad, 0);
        CHECK_EQ_INT(r.replays, 3);
        silver_sorter_free(x);
    }
    /* a key twice, in order otherwise: refused too */
    {
        replay_src r = {.s = s, .batches = 1, .rows = 3};
        silver_sorter *x = new_sorter(st, s, true, SILVER_TAG_BASE, 0);
        silver_sorter_set_replay(x, replay_fn, &r);
        mcdc_batch *b;
        mcdc_batch_create(&b, s, 3, &e);
        add_change(b, 1, "a", 100, 0, -1, -1);
        add_change(b, 2, "b", 100, 0, -1, -1);
        add_change(b, 2, "c", 101, 2, 1, 5);
        mcdc_batch_seal(b, &e);
        uint32_t tags[3] = {SILVER_TAG_BASE, SILVER_TAG_BASE, SILVER_TAG_BASE};
        CHECK_EQ_INT(silver_sorter_add_owned(x, b, tags, &e), MCDC_E_CANCELLED);
        CHECK(silver_sorter_replay_broken(x));
        silver_sorter_free(x);
    }
    mcdc_storage_listing l = {0};
    mcdc_storage_list(st, "_mssql_cdc_spill/", &l, &e);
    CHECK_EQ_INT(l.count, 0);
    mcdc_storage_listing_free(&l);
    mcdc_schema_unref(s);
    mcdc_storage_free(st);
    mcdc_storage_mem_release(m);
}

TEST(silver_sorter_merges_runs_past_the_most_read_at_once) {
    mcdc_storage_mem *m;
    mcdc_storage *st;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage_mem_create(&m, "sorter-merge", &e);
    mcdc_storage_mem_open(&st, m, NULL, &e);
    mcdc_schema *s = change_schema();
    static const int32_t key[1] = {0};
    silver_sorter_cfg c = {.schema = s, .key_cols = key, .n_keys = 1, .ranked = true,
                           .lsn_col = 2, .op_col = 3, .cmd_col = 4, .seq_col = 5, .held_cols = 4,
                           .keep_tags = 1, .memory_bytes = SILVER_SORT_BYTES_MIN, .spill = st,
                           .spill_prefix = "_mssql_cdc_spill/t-"};
    silver_sorter *x = NULL;
    CHECK_EQ_INT(silver_sorter_create(&x, &c, &e), MCDC_OK);
    enum { K = 1000, PARTS = 400 };
    mcdc_batch *b;
    uint32_t *tags = malloc(K * sizeof *tags);
    int best_part[K];
    int64_t best_lsn[K];
    for (int i = 0; i < K; i++) best_lsn[i] = -1;
    for (int p = 0; p < PARTS && x; p++) {
        mcdc_batch_create(&b, s, K, &e);
        for (int i = 0; i < K; i++) {
            /* distinct over the parts of a key: 7919 is prime to 400000 */
            int64_t lsn = 1 + ((int64_t)p * 7919 + (int64_t)i * 104729) % 400000;
            char v[32];
            snprintf(v, sizeof v, "p%d-k%d", p, i);
            add_change(b, i, v, lsn, 2, 0, 1);
            tags[i] = p == PARTS - 1 ? 1u | 2u : 2u;
            if (lsn > best_lsn[i]) best_lsn[i] = lsn, best_part[i] = p;
        }
        mcdc_batch_seal(b, &e);
        CHECK_EQ_INT(silver_sorter_add(x, b, NULL, 0, tags, &e), MCDC_OK);
        mcdc_batch_free(b);
    }
    CHECK_EQ_INT(silver_sorter_finish(x, &e), MCDC_OK);
    CHECK(silver_sorter_merges(x) >= 1);
    CHECK(silver_sorter_runs(x) > SILVER_RUNS_MAX);
    mcdc_storage_listing l = {0};
    CHECK_EQ_INT(mcdc_storage_list(st, "_mssql_cdc_spill/", &l, &e), MCDC_OK);
    CHECK(l.count >= 1 && l.count < SILVER_RUNS_MAX); /* the merged runs are gone */
    mcdc_storage_listing_free(&l);
    CHECK_EQ_INT(silver_sorter_rewind(x, false, &e), MCDC_OK);
    const silver_chunk *ch;
    int64_t seen = 0, wrong = 0, last = -1;
    while (silver_sorter_next(x, &ch, &e) == MCDC_OK && ch) {
        CHECK_EQ_INT(ch->rows->schema->n_fields, 4);
        for (int64_t r = 0; r < ch->n; r++) {
            int id = i32_at(ch->rows, 0, r);
            const mcdc_column *v = &ch->rows->columns[1];
            char want[32];
            snprintf(want, sizeof want, "p%d-k%d", id >= 0 && id < K ? best_part[id] : -1, id);
            size_t n = (size_t)(v->offsets[r + 1] - v->offsets[r]);
            wrong += id <= last || n != strlen(want) || memcmp(v->data + v->offsets[r], want, n) != 0 ||
                     ch->tags[r] != 3u;
            last = id;
            seen++;
        }
    }
    CHECK_EQ_INT(seen, K);
    CHECK_EQ_INT(wrong, 0);
    free(tags);
    silver_sorter_free(x);
    CHECK_EQ_INT(mcdc_storage_list(st, "_mssql_cdc_spill/", &l, &e), MCDC_OK);
    CHECK_EQ_INT(l.count, 0); /* the sorter deletes its runs */
    mcdc_storage_listing_free(&l);
    mcdc_schema_unref(s);
    mcdc_storage_free(st);
    mcdc_storage_mem_release(m);
}

/* Reads the sorter from its first row to its end: the first failure (of
 * the rewind or a chunk), and the rows read in *rows. */
static int drain_sorter(silver_sorter *x, bool keys_only, int64_t *rows, mcdc_error *e) {
    *rows = 0;
    mcdc_error_clear(e);
    int rc = silver_sorter_rewind(x, keys_only, e);
    const silver_chunk *ch = NULL;
    while (rc == MCDC_OK && (rc = silver_sorter_next(x, &ch, e)) == MCDC_OK && ch) *rows += ch->n;
    return rc;
}

/* The sorter spills before what it holds would pass its budget, whatever
 * the rows picked from a batch are like: here the rows added are the long
 * values of batches whose other rows are nearly empty (an average of the
 * batch's rows would say half of what they take), of lengths that wander,
 * added in parts over many spills (each run's batches come back through
 * the schema's pool with the buffers of the last). Budgets from 2 MB: below
 * that, the first rows' buffers alone pass it (mcdc_silver.h). */
TEST(silver_sorter_holds_at_most_its_budget_whatever_rows_are_picked) {
    mcdc_storage_mem *m;
    mcdc_storage *st;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage_mem_create(&m, "sorter-budget", &e);
    mcdc_storage_mem_open(&st, m, NULL, &e);
    mcdc_schema *s = change_schema();
    static const int32_t key[1] = {0};
    for (int budget_mb = 2; budget_mb <= 4; budget_mb++) {
        int64_t mem = (int64_t)budget_mb * 1024 * 1024;
        silver_sorter_cfg c = {.schema = s, .key_cols = key, .n_keys = 1, .ranked = true,
                               .lsn_col = 2, .op_col = 3, .cmd_col = 4, .seq_col = 5,
                               .held_cols = 4, .keep_tags = 1, .memory_bytes = mem,
                               .spill = st, .spill_prefix = "_mssql_cdc_spill/b-"};
        silver_sorter *x = NULL;
        CHECK_EQ_INT(silver_sorter_create(&x, &c, &e), MCDC_OK);
        enum { ROWS = 3000, PARTS = 60 };
        uint32_t *tags = malloc(ROWS * sizeof *tags);
        int32_t *picked = malloc(ROWS * sizeof *picked);
        char *v = malloc(1024);
        uint32_t seed = 12345u + (uint32_t)budget_mb;
        int64_t over = 0, added = 0;
        for (int p = 0; p < PARTS && x && tags && picked && v; p++) {
            mcdc_batch *b;
            mcdc_batch_create(&b, s, ROWS, &e);
            int32_t n = 0;
            for (int i = 0; i < ROWS; i++) {
                seed = seed * 1103515245u + 12345u;
                bool pick = i % 2 == 0;
                size_t len = pick ? 40 + (seed >> 16) % 400 : 1;
                memset(v, 'a' + (char)(i % 26), len);
                v[len] = 0;
                add_change(b, p * ROWS + i, v, 1 + p * ROWS + i, 2, 0, 1);
                tags[i] = 1u;
                if (pick) picked[n++] = i;
            }
            mcdc_batch_seal(b, &e);
            /* in parts of varying size, as a scan's rows come */
            for (int32_t at = 0; at < n;) {
                int32_t k = 100 + (int32_t)((seed >> 8) % 900);
                if (k > n - at) k = n - at;
                CHECK_EQ_INT(silver_sorter_add(x, b, picked + at, k, tags, &e), MCDC_OK);
                over += silver_sorter_held_max(x) > mem;
                added += k;
                at += k;
                seed = seed * 1103515245u + 12345u;
            }
            mcdc_batch_free(b);
        }
        CHECK_EQ_INT(over, 0);
        if (over || getenv("SHOW"))
            fprintf(stderr, "  budget %d MB: held at most %lld bytes, %lld runs\n", budget_mb,
                    (long long)silver_sorter_held_max(x), (long long)silver_sorter_runs(x));
        CHECK(silver_sorter_runs(x) >= 4); /* the case needs runs, and batches coming back */
        CHECK_EQ_INT(silver_sorter_finish(x, &e), MCDC_OK);
        int64_t rows = 0;
        CHECK_EQ_INT(drain_sorter(x, true, &rows, &e), MCDC_OK);
        CHECK_EQ_INT(rows, added);
        free(tags);
        free(picked);
        free(v);
        silver_sorter_free(x);
    }
    mcdc_schema_unref(s);
    mcdc_storage_free(st);
    mcdc_storage_mem_release(m);
}

/* A spilled run is a file like any other: damaged, cut short or replaced,
 * it is refused as corrupt, naming the file and the frame pair; never read
 * as rows. */
TEST(silver_sorter_refuses_a_damaged_run) {
    mcdc_storage_mem *m;
    mcdc_storage *st;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage_mem_create(&m, "sorter6", &e);
    mcdc_storage_mem_open(&st, m, NULL, &e);
    mcdc_schema *s = change_schema();
    silver_sorter *x = new_sorter(st, s, false, 0, SILVER_SORT_BYTES_MIN);
    enum { N = 40000 };
    mcdc_batch *b;
    mcdc_batch_create(&b, s, N, &e);
    for (int i = 0; i < N; i++) {
        char v[48];
        snprintf(v, sizeof v, "value-%d-padded-to-spill-sooner", i);
        add_change(b, (i * 31) % 5000, v, 5, 2, 0, i % 3 ? 1 : -1);
    }
    mcdc_batch_seal(b, &e);
    /* in ten parts: the budget is checked after each, so many runs spill */
    int32_t *part = malloc(N / 10 * sizeof *part);
    for (int k = 0; k < 10; k++) {
        for (int i = 0; i < N / 10; i++) part[i] = k * (N / 10) + i;
        CHECK_EQ_INT(silver_sorter_add(x, b, part, N / 10, NULL, &e), MCDC_OK);
    }
    free(part);
    CHECK_EQ_INT(silver_sorter_finish(x, &e), MCDC_OK);
    CHECK(silver_sorter_runs(x) >= 5);
    int64_t rows = 0;
    CHECK_EQ_INT(drain_sorter(x, false, &rows, &e), MCDC_OK);
    CHECK_EQ_INT(rows, N);
    mcdc_storage_listing l = {0};
    CHECK_EQ_INT(mcdc_storage_list(st, "_mssql_cdc_spill/", &l, &e), MCDC_OK);
    CHECK(l.count >= 2);
    char key[256] = "";
    if (l.count > 0) snprintf(key, sizeof key, "_mssql_cdc_spill/%s", l.entries[0].name);
    mcdc_storage_listing_free(&l);
    CHECK(strlen(key) > 7 && strcmp(key + strlen(key) - 7, ".frames") == 0);
    mcdc_buf run = {0};
    CHECK_EQ_INT(mcdc_storage_get(st, key, 1u << 30, &run, &e), MCDC_OK);
    CHECK(run.len > 8192);
    uint8_t *bad = malloc(run.len);
    struct {
        size_t len;
        size_t flip;    /* a byte flipped (or past len: none) */
        bool keys_see;  /* a keys-only pass reads the damage too */
        const char *want;
    } cases[] = {
        {run.len, run.len - 1, false, "body's checksum"}, /* the last pair's rows */
        {run.len, 200, true, "body's checksum"},          /* the first pair's keys */
        {run.len, 13, true, "head's checksum"},           /* the first keys frame's rows */
        {run.len / 2, run.len, true, "truncated"},
        {200, run.len, true, "bad magic"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(bad, run.data, run.len);
        if (cases[i].len == 200) memset(bad, 'x', 200);
        if (cases[i].flip < cases[i].len) bad[cases[i].flip] ^= 0x10;
        CHECK_EQ_INT(mcdc_storage_put(st, key, bad, cases[i].len, &e), MCDC_OK);
        for (int keys_only = 0; keys_only < 2; keys_only++) {
            int rc = drain_sorter(x, keys_only, &rows, &e);
            if (keys_only && !cases[i].keys_see) {
                /* a keys-only pass skips the rows frames unread */
                CHECK_EQ_INT(rc, MCDC_OK);
                CHECK_EQ_INT(rows, N);
                continue;
            }
            CHECK_EQ_INT(rc, MCDC_E_CORRUPT);
            CHECK(strstr(e.message, key) && strstr(e.message, "frame pair"));
            CHECK(strstr(e.message, cases[i].want) != NULL);
            if (!strstr(e.message, cases[i].want) || getenv("SHOW")) fprintf(stderr, "  case %zu: %s\n", i, e.message);
        }
    }
    /* put back, it reads again */
    CHECK_EQ_INT(mcdc_storage_put(st, key, run.data, run.len, &e), MCDC_OK);
    CHECK_EQ_INT(drain_sorter(x, true, &rows, &e), MCDC_OK);
    CHECK_EQ_INT(rows, N);
    free(bad);
    mcdc_buf_free(&run);
    mcdc_batch_free(b);
    silver_sorter_free(x);
    mcdc_schema_unref(s);
    /* rows of one small column: a run of several frame pairs, damaged in
     * its last; the message names that pair */
    mcdc_schema *s1;
    mcdc_schema_create(&s1, 1, &e);
    mcdc_schema_set(s1, 0, "id", MCDC_TYPE_INT32, 0, 0, 0, true, &e);
    static const int32_t key0[1] = {0};
    silver_sorter_cfg c1 = {.schema = s1, .key_cols = key0, .n_keys = 1,
                            .memory_bytes = SILVER_SORT_BYTES_MIN, .spill = st,
                            .spill_prefix = "_mssql_cdc_spill/one-"};
    CHECK_EQ_INT(silver_sorter_create(&x, &c1, &e), MCDC_OK);
    enum { N1 = 60000 };
    mcdc_batch_create(&b, s1, N1, &e);
    for (int i = 0; i < N1; i++) mcdc_col_append_int(&b->columns[0], (i * 7919) % N1, &e);
    mcdc_batch_seal(b, &e);
    CHECK_EQ_INT(silver_sorter_add(x, b, NULL, 0, NULL, &e), MCDC_OK);
    CHECK_EQ_INT(silver_sorter_finish(x, &e), MCDC_OK);
    CHECK_EQ_INT(silver_sorter_runs(x), 1);
    l = (mcdc_storage_listing){0};
    mcdc_storage_list(st, "_mssql_cdc_spill/one-", &l, &e);
    CHECK_EQ_INT(l.count, 1);
    if (l.count == 1) snprintf(key, sizeof key, "_mssql_cdc_spill/%s", l.entries[0].name);
    mcdc_storage_listing_free(&l);
    run = (mcdc_buf){0};
    CHECK_EQ_INT(mcdc_storage_get(st, key, 1u << 30, &run, &e), MCDC_OK);
    if (run.len > 0) run.data[run.len - 1] ^= 1;
    CHECK_EQ_INT(mcdc_storage_put(st, key, run.data, run.len, &e), MCDC_OK);
    CHECK_EQ_INT(drain_sorter(x, false, &rows, &e), MCDC_E_CORRUPT);
    char pair[32];
    snprintf(pair, sizeof pair, "frame pair %d ", (int)((N1 - 1) / 8192)); /* the cut keeps every row */
    CHECK(strstr(e.message, pair) != NULL && strstr(e.message, "body's checksum") != NULL);
    if (!strstr(e.message, pair)) fprintf(stderr, "  want '%s' in: %s\n", pair, e.message);
    mcdc_buf_free(&run);
    mcdc_batch_free(b);
    silver_sorter_free(x);
    mcdc_schema_unref(s1);
    mcdc_storage_free(st);
    mcdc_storage_mem_release(m);
}

/* A sorter's life (rows added in parts so that runs spill and are merged,
 * then read twice: rows, then keys only): MCDC_OK with every row, or the
 * failure. */
enum { LIFE_WRONG = 99 }; /* sorter_life's own: the life went wrong without an error */
static int sorter_life(mcdc_storage *st, mcdc_schema *s, const mcdc_batch *b, int64_t *rows,
                       mcdc_error *e) {
    *rows = 0;
    silver_sorter *x = NULL;
    static const int32_t key[1] = {0};
    silver_sorter_cfg c = {.schema = s, .key_cols = key, .n_keys = 1,
                           .memory_bytes = SILVER_SORT_BYTES_MIN, .runs_max = 3, .spill = st,
                           .spill_prefix = "_mssql_cdc_spill/f-"};
    int rc = silver_sorter_create(&x, &c, e);
    int32_t part[2000];
    for (int64_t at = 0; rc == MCDC_OK && at < b->rows; at += 2000) {
        int64_t n = b->rows - at < 2000 ? b->rows - at : 2000;
        for (int64_t i = 0; i < n; i++) part[i] = (int32_t)(at + i);
        rc = silver_sorter_add(x, b, part, n, NULL, e);
    }
    if (rc == MCDC_OK) rc = silver_sorter_finish(x, e);
    /* the case needs runs, and runs merged (three at most at once) */
    if (rc == MCDC_OK && (silver_sorter_runs(x) < 4 || silver_sorter_merges(x) < 1)) rc = LIFE_WRONG;
    if (rc == MCDC_OK) rc = drain_sorter(x, false, rows, e);
    int64_t keys = 0;
    if (rc == MCDC_OK) rc = drain_sorter(x, true, &keys, e);
    if (rc == MCDC_OK && keys != *rows) rc = LIFE_WRONG;
    silver_sorter_free(x);
    return rc;
}

static mcdc_batch *life_rows(mcdc_schema *s, int n) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_batch *b;
    mcdc_batch_create(&b, s, n, &e);
    for (int i = 0; i < n; i++) {
        char v[80];
        snprintf(v, sizeof v, "%d-a-value-long-enough-that-a-few-thousand-rows-pass-the-budget", i);
        add_change(b, (i * 37) % n, v, 5, 2, 0, 1);
    }
    mcdc_batch_seal(b, &e);
    return b;
}

/* Every storage call and many allocations of a spilling sorter's life
 * failed in turn: the failure comes back, nothing leaks, no run is left
 * behind (the sorter deletes its runs), and without one every row is read. */
TEST(silver_sorter_spilling_fails_cleanly_at_each_storage_call_and_allocation) {
    mcdc_storage_mem *m;
    mcdc_storage *st;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage_mem_create(&m, "sorter7", &e);
    mcdc_storage_mem_open(&st, m, NULL, &e);
    enum { N = 12000 };
    mcdc_schema *s = change_schema();
    mcdc_batch *b = life_rows(s, N);
    int64_t rows = 0;
    CHECK_EQ_INT(sorter_life(st, s, b, &rows, &e), MCDC_OK);
    CHECK_EQ_INT(rows, N);
    const mcdc_log_sink *host = mcdc_log_use(&mcdc_test_quiet);
    int io_failures = 0;
    for (int64_t nth = 1;; nth += mcdc_test_fault_step) {
        mcdc_storage_mem_fail_nth(m, MCDC_STORAGE_OP_ANY, nth, MCDC_E_IO);
        mcdc_error fe = MCDC_ERROR_INIT;
        int rc = sorter_life(st, s, b, &rows, &fe);
        bool fired = mcdc_storage_mem_fault_fired(m);
        mcdc_storage_mem_fail_nth(m, MCDC_STORAGE_OP_ANY, 0, 0);
        if (!fired) {
            CHECK_EQ_INT(rc, MCDC_OK);
            CHECK_EQ_INT(rows, N);
            break;
        }
        /* a failed delete of a run is not the sorter's failure */
        CHECK(rc == MCDC_OK || rc == MCDC_E_IO);
        io_failures += rc == MCDC_E_IO;
    }
    CHECK(io_failures * mcdc_test_fault_step > 10);
    int nomem = 0;
    for (int64_t nth = 1; nth < 4000; nth += nth < 120 ? mcdc_test_fault_step : 173) {
        /* a store and rows of their own: what the store's journal and the
         * schema's batch pool keep goes with them */
        mcdc_alloc_stats before, after;
        mcdc_alloc_get_stats(&before);
        mcdc_storage_mem *m2;
        mcdc_storage *st2;
        mcdc_storage_mem_create(&m2, "sorter7b", &e);
        mcdc_storage_mem_open(&st2, m2, NULL, &e);
        mcdc_schema *s2 = change_schema();
        mcdc_batch *b2 = life_rows(s2, N);
        mcdc_alloc_fail_at(nth);
        mcdc_error fe = MCDC_ERROR_INIT;
        int rc = sorter_life(st2, s2, b2, &rows, &fe);
        mcdc_alloc_fail_at(0);
        CHECK(rc == MCDC_OK || rc == MCDC_E_NOMEM);
        if (rc == MCDC_OK) CHECK_EQ_INT(rows, N);
        nomem += rc == MCDC_E_NOMEM;
        mcdc_storage_listing l = {0};
        mcdc_storage_list(st2, "_mssql_cdc_spill/", &l, &e);
        /* no run left behind, but where the failure hit a delete of the
         * sorter's free (which cannot fail: the next pass empties the
         * spill directory) */
        CHECK(l.count == 0 || rc == MCDC_OK);
        mcdc_storage_listing_free(&l);
        mcdc_batch_free(b2);
        mcdc_schema_unref(s2);
        mcdc_storage_free(st2);
        mcdc_storage_mem_release(m2);
        mcdc_alloc_get_stats(&after);
        CHECK_EQ_INT(after.live_bytes, before.live_bytes);
    }
    CHECK(nomem * mcdc_test_fault_step > 50);
    mcdc_log_use(host);
    mcdc_batch_free(b);
    mcdc_schema_unref(s);
    mcdc_storage_free(st);
    mcdc_storage_mem_release(m);
}

/* ---- the merge ------------------------------------------------------------------------ */

/* silver: id INT32, val UTF8, _start_lsn UTF8, _commit_ts TIMESTAMP_NTZ */
static mcdc_schema *silver_schema(void) {
    mcdc_schema *s;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_schema_create(&s, 4, &e);
    mcdc_schema_set(s, 0, "id", MCDC_TYPE_INT32, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 1, "val", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 2, "_start_lsn", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 3, "_commit_ts", MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0, true, &e);
    return s;
}

/* change rows for the merge: id, val, _start_lsn, _commit_ts, _operation,
 * _command_id, _seqval (tags apart) */
static mcdc_schema *mchange_schema(void) {
    mcdc_schema *s;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_schema_create(&s, 7, &e);
    mcdc_schema_set(s, 0, "id", MCDC_TYPE_INT32, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 1, "val", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 2, "_start_lsn", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 3, "_commit_ts", MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 4, "_operation", MCDC_TYPE_INT32, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 5, "_command_id", MCDC_TYPE_INT32, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 6, "_seqval", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    return s;
}

typedef struct {
    int id, op;
    int64_t lsn;
    const char *val;
    int tag;
} mchange;

/* What silver should hold: val per id (NULL: absent), and each row's lsn. */
#define MODEL_IDS 5000
typedef struct {
    char val[MODEL_IDS][24];
    bool has[MODEL_IDS];
    int64_t lsn[MODEL_IDS];
} model;

typedef struct {
    mcdc_storage_mem *m;
    mcdc_storage_env env;
    mcdc_table *t;
    mcdc_storage *spill;
    int64_t file_rows;
    bool has_position; /* silver's position, for the merge (silver_merge_in) */
    int64_t position;
} mtest;

static void mtest_open(mtest *x, const char *name, int64_t file_rows) {
    mcdc_error e = MCDC_ERROR_INIT;
    memset(x, 0, sizeof *x);
    mcdc_storage_mem_create(&x->m, name, &e);
    x->env = mcdc_storage_mem_env(x->m);
    char loc[64];
    snprintf(loc, sizeof loc, "mem://%s/silver", name);
    mcdc_table_open_env(&x->t, &x->env, loc, NULL, &e);
    x->spill = mcdc_table_storage(x->t);
    x->file_rows = file_rows;
}

static void mtest_close(mtest *x) {
    mcdc_table_close(x->t);
    mcdc_storage_mem_release(x->m);
}

/* One merge of changes into the table, committed with its index; returns
 * the status and fills *res. */
static int merge_changes(mtest *x, const mchange *ch, int n, bool rebuild, const silver_range *ranges,
                         int n_ranges, silver_merge_out *res_out, mcdc_error *e) {
    mcdc_schema *cs = mchange_schema(), *ss = silver_schema();
    static const int32_t key[1] = {0};
    silver_sorter_cfg sc = {.schema = cs, .key_cols = key, .n_keys = 1, .ranked = true,
                            .lsn_col = 2, .op_col = 4, .cmd_col = 5, .seq_col = 6,
                            .keep_tags = SILVER_TAG_BASE | SILVER_TAG_WAVE,
                            .memory_bytes = SILVER_SORT_BYTES_MIN, .spill = x->spill,
                            .spill_prefix = "_mssql_cdc_spill/m-"};
    silver_sorter *so = NULL;
    int rc = silver_sorter_create(&so, &sc, e);
    mcdc_batch *b = NULL;
    uint32_t *tags = calloc((size_t)(n ? n : 1), sizeof *tags);
    if (rc == MCDC_OK) rc = mcdc_batch_create(&b, cs, n ? n : 1, e);
    for (int i = 0; rc == MCDC_OK && i < n; i++) {
        char l[23];
        lsn_text(l, ch[i].lsn);
        mcdc_col_append_int(&b->columns[0], ch[i].id, e);
        if (ch[i].val) mcdc_col_append_bytes(&b->columns[1], ch[i].val, (int64_t)strlen(ch[i].val), e);
        else mcdc_col_append_null(&b->columns[1], e);
        mcdc_col_append_bytes(&b->columns[2], l, 22, e);
        mcdc_col_append_int(&b->columns[3], ch[i].lsn * 1000, e);
        mcdc_col_append_int(&b->columns[4], ch[i].op, e);
        mcdc_col_append_int(&b->columns[5], 1, e);
        mcdc_col_append_bytes(&b->columns[6], l, 22, e);
        tags[i] = ch[i].tag ? (uint32_t)ch[i].tag : SILVER_TAG_BASE;
    }
    if (rc == MCDC_OK) rc = mcdc_batch_seal(b, e);
    if (rc == MCDC_OK) rc = silver_sorter_add(so, b, NULL, 0, tags, e);
    free(tags);
    if (rc == MCDC_OK) rc = silver_sorter_finish(so, e);
    mcdc_table_view *v = NULL;
    if (rc == MCDC_OK) rc = mcdc_table_view_open(&v, x->t, -1, e);
    static const int32_t c_of_out[4] = {0, 1, 2, 3}, e_of_out[4] = {0, 1, 2, 3};
    static const char *const keys[1] = {"id"};
    mcdc_table_props props = {.kind = MCDC_KIND_SILVER};
    silver_merge_in in = {.target = x->t, .view = v, .out_schema = ss, .change_of_out = c_of_out,
                          .exist_of_out = e_of_out, .keys = keys, .n_keys = 1, .changes = so,
                          .change_lsn_col = 2, .rebuild = rebuild, .ranges = ranges,
                          .n_ranges = n_ranges, .file_rows = x->file_rows,
                          .has_position = x->has_position,
                          .memory_bytes = SILVER_SORT_BYTES_MIN, .spill = x->spill,
                          .spill_prefix = "_mssql_cdc_spill/m-", .props = &props};
    char pos[23];
    lsn_text(pos, x->position);
    silver_lsn_parse(in.position, pos, 22);
    silver_merge_out out = {0};
    if (rc == MCDC_OK) rc = silver_merge_run(&out, &in, e);
    int64_t read_version = v ? mcdc_table_view_version(v) : -1;
    if (rc == MCDC_OK && out.changed)
        rc = silver_index_store(x->spill, &out.index, read_version + 1, e);
    if (rc == MCDC_OK && out.changed) {
        mcdc_table_commit c = {.operation = "MERGE", .remove_paths = (const char *const *)out.removes,
                               .n_removes = out.n_removes, .read_version = read_version < 0 ? -1 : read_version};
        bool skipped;
        int64_t ver;
        if (read_version < 0) c.read_version = -1;
        rc = mcdc_appender_commit_with(out.appender, &c, &skipped, &ver, e);
    }
    if (res_out) {
        *res_out = out;
        res_out->appender = NULL;
        res_out->removes = NULL;
        res_out->n_removes = out.n_removes;
        memset(&res_out->index, 0, sizeof res_out->index);
    }
    silver_merge_out_free(&out);
    mcdc_table_view_free(v);
    mcdc_batch_free(b);
    silver_sorter_free(so);
    mcdc_schema_unref(cs);
    mcdc_schema_unref(ss);
    return rc;
}

/* Applies changes to the model as the reference's rules say. */
static void model_apply(model *md, const mchange *ch, int n, bool rebuild) {
    /* latest per key by lsn (op wins ties as in the rank) */
    static int best[MODEL_IDS];
    for (int i = 0; i < MODEL_IDS; i++) best[i] = -1;
    for (int i = 0; i < n; i++) {
        if (ch[i].tag && !((unsigned)ch[i].tag & (SILVER_TAG_BASE | SILVER_TAG_WAVE))) continue;
        int b = best[ch[i].id];
        if (b < 0 || ch[i].lsn > ch[b].lsn || (ch[i].lsn == ch[b].lsn && ch[i].op > ch[b].op)) best[ch[i].id] = i;
    }
    for (int id = 0; id < MODEL_IDS; id++) {
        int b = best[id];
        if (b < 0) {
            if (rebuild) md->has[id] = false;
            continue;
        }
        const mchange *c = &ch[b];
        if (md->has[id] && c->lsn <= md->lsn[id]) continue;
        if (c->op == 1 || c->op == 3) {
            md->has[id] = false;
        } else {
            md->has[id] = true;
            snprintf(md->val[id], sizeof md->val[id], "%s", c->val ? c->val : "");
            md->lsn[id] = c->lsn;
        }
    }
}

/* silver's rows equal the model's, once each */
static int64_t check_table(mtest *x, const model *md) {
    mcdc_batch *all = NULL;
    int64_t v;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_table_read_all(x->t, &all, &v, &e), MCDC_OK);
    static int seen[MODEL_IDS];
    memset(seen, 0, sizeof seen);
    int64_t bad = 0, rows = all ? all->rows : 0;
    for (int64_t r = 0; r < rows; r++) {
        mcdc_cell id = mcdc_row_get(all, r, 0), val = mcdc_row_get(all, r, 1), l = mcdc_row_get(all, r, 2);
        if (id.kind != MCDC_CELL_INT || id.i < 0 || id.i >= MODEL_IDS) {
            bad++;
            continue;
        }
        seen[id.i]++;
        char lt[23];
        lsn_text(lt, md->lsn[id.i]);
        if (!md->has[id.i] || val.kind != MCDC_CELL_TEXT || (size_t)val.i != strlen(md->val[id.i]) ||
            memcmp(val.s, md->val[id.i], (size_t)val.i) != 0 || l.kind != MCDC_CELL_TEXT ||
            memcmp(l.s, lt, 22) != 0) {
            if (bad < 5) fprintf(stderr, "  id %lld: silver '%.*s', model %s'%s'\n", (long long)id.i,
                                 val.kind == MCDC_CELL_TEXT ? (int)val.i : 4,
                                 val.kind == MCDC_CELL_TEXT ? val.s : "NULL",
                                 md->has[id.i] ? "" : "(absent) ", md->val[id.i]);
            bad++;
        }
    }
    int64_t want = 0;
    for (int id = 0; id < MODEL_IDS; id++) {
        want += md->has[id];
        if (seen[id] != (md->has[id] ? 1 : 0)) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(rows, want);
    mcdc_batch_free(all);
    return rows;
}

static int live_files(mtest *x) {
    mcdc_table_view *v = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_table_view_open(&v, x->t, -1, &e);
    int n = v ? (int)mcdc_table_view_file_count(v) : 0;
    mcdc_table_view_free(v);
    return n;
}

static mchange *gen_changes(int n, uint32_t seed, int64_t lsn0, int *ops_mix) {
    mchange *c = calloc((size_t)n, sizeof *c);
    static char vals[8][8] = {"a", "bb", "ccc", "", "e\0e", "ffff", "g", "hh"};
    for (int i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        c[i].id = (int)((seed >> 8) % MODEL_IDS);
        int r = (int)((seed >> 4) % 10);
        c[i].op = ops_mix ? ops_mix[r] : (r < 2 ? 1 : r < 5 ? 2 : r < 6 ? 3 : 4);
        c[i].lsn = lsn0 + i / 3; /* commits of three rows */
        c[i].val = vals[(seed >> 16) % 8];
    }
    return c;
}

TEST(silver_merge_builds_and_updates_only_the_files_it_must) {
    mtest x;
    mtest_open(&x, "merge1", 500);
    mcdc_error e = MCDC_ERROR_INIT;
    static model md;
    memset(&md, 0, sizeof md);
    /* first: inserts of every key, out of order */
    int n = MODEL_IDS;
    mchange *c = calloc((size_t)n, sizeof *c);
    for (int i = 0; i < n; i++) c[i] = (mchange){(i * 37) % MODEL_IDS, 2, 10, "first", 0};
    silver_merge_out res;
    CHECK_EQ_INT(merge_changes(&x, c, n, false, NULL, 0, &res, &e), MCDC_OK);
    model_apply(&md, c, n, false);
    CHECK_EQ_INT(res.inserted, MODEL_IDS);
    CHECK_EQ_INT(check_table(&x, &md), MODEL_IDS);
    CHECK_EQ_INT(live_files(&x), MODEL_IDS / 500); /* files of file_rows rows */
    free(c);
    /* a few updates of keys in one file: one file rewritten */
    mchange few[3] = {{10, 4, 20, "upd", 0}, {11, 1, 20, NULL, 0}, {12, 4, 5, "older", 0}};
    CHECK_EQ_INT(merge_changes(&x, few, 3, false, NULL, 0, &res, &e), MCDC_OK);
    model_apply(&md, few, 3, false);
    CHECK_EQ_INT(res.n_removes, 1);
    CHECK_EQ_INT(res.updated, 1);
    CHECK_EQ_INT(res.deleted, 1);
    check_table(&x, &md);
    /* random changes of every kind, several rounds, then the same again
     * (a reapply from behind changes nothing) */
    for (int round = 0; round < 4; round++) {
        int m2 = 1500;
        mchange *r = gen_changes(m2, 7u + (uint32_t)round, 100 + round * 1000, NULL);
        CHECK_EQ_INT(merge_changes(&x, r, m2, false, NULL, 0, &res, &e), MCDC_OK);
        model_apply(&md, r, m2, false);
        check_table(&x, &md);
        if (round == 3) {
            CHECK_EQ_INT(merge_changes(&x, r, m2, false, NULL, 0, &res, &e), MCDC_OK);
            CHECK_EQ_INT(res.inserted + res.updated + res.deleted, 0);
            check_table(&x, &md);
        }
        free(r);
    }
    /* files stay about file_rows: none tiny and far from a neighbour */
    int files = live_files(&x);
    int64_t rows = 0;
    for (int id = 0; id < MODEL_IDS; id++) rows += md.has[id];
    CHECK(files <= rows / 500 * 2 + 2);
    /* its index knows every live file */
    silver_index ix;
    mcdc_schema *ks;
    mcdc_schema_create(&ks, 1, &e);
    mcdc_schema_set(ks, 0, "id", MCDC_TYPE_INT32, 0, 0, 0, true, &e);
    CHECK_EQ_INT(silver_index_load(&ix, x.spill, ks, &e), MCDC_OK);
    CHECK_EQ_INT(ix.n, files);
    for (int64_t i = 0; i < ix.n; i++) CHECK(ix.entries[i].sorted);
    silver_index_clear(&ix);
    mcdc_schema_unref(ks);
    mtest_close(&x);
}

TEST(silver_merge_rebuild_deletes_what_no_change_names) {
    mtest x;
    mtest_open(&x, "merge2", 700);
    mcdc_error e = MCDC_ERROR_INIT;
    static model md;
    memset(&md, 0, sizeof md);
    mchange *r = gen_changes(3000, 3u, 100, NULL);
    CHECK_EQ_INT(merge_changes(&x, r, 3000, false, NULL, 0, NULL, &e), MCDC_OK);
    model_apply(&md, r, 3000, false);
    free(r);
    /* a snapshot of half the keys at lsn 5000, and later changes */
    mchange *s = calloc(4000, sizeof *s);
    int n = 0;
    for (int id = 0; id < MODEL_IDS; id += 2) s[n++] = (mchange){id, 0, 5000, "snap", 0};
    for (int i = 0; i < 500; i++) s[n++] = (mchange){(i * 13) % MODEL_IDS, (i % 3) ? 4 : 1, 5001 + i, "after", 0};
    silver_merge_out res;
    CHECK_EQ_INT(merge_changes(&x, s, n, true, NULL, 0, &res, &e), MCDC_OK);
    model_apply(&md, s, n, true);
    check_table(&x, &md);
    CHECK(res.deleted > 0);
    free(s);
    mtest_close(&x);
}

TEST(silver_merge_chunk_ranges_delete_the_keys_a_chunk_lacks) {
    mtest x;
    mtest_open(&x, "merge3", 400);
    mcdc_error e = MCDC_ERROR_INIT;
    static model md;
    memset(&md, 0, sizeof md);
    mchange *c = calloc(MODEL_IDS, sizeof *c);
    for (int i = 0; i < MODEL_IDS; i++) c[i] = (mchange){i, 2, 10, "old", 0};
    CHECK_EQ_INT(merge_changes(&x, c, MODEL_IDS, false, NULL, 0, NULL, &e), MCDC_OK);
    model_apply(&md, c, MODEL_IDS, false);
    /* a wave: chunk [1000, 2000) stamped 50 holds only the even keys; key
     * 1001 was changed at 60 (after the stamp: kept); key 1003 at 40
     * (before: the chunk's absence wins) */
    int n = 0;
    for (int id = 1000; id < 2000; id += 2) c[n++] = (mchange){id, 0, 50, "chunk", (int)SILVER_TAG_WAVE};
    c[n++] = (mchange){1001, 4, 60, "later", 0};
    c[n++] = (mchange){1003, 4, 40, "before", 0};
    silver_range rg = {true, true, 1000, 2000, {0}};
    silver_lsn_parse(rg.stamp, "0x00000000000000000032", 22); /* 50 */
    silver_merge_out res;
    CHECK_EQ_INT(merge_changes(&x, c, n, false, &rg, 1, &res, &e), MCDC_OK);
    model_apply(&md, c, n, false);
    for (int id = 1001; id < 2000; id += 2)
        if (id != 1001) md.has[id] = false;
    check_table(&x, &md);
    CHECK(md.has[1001] && strcmp(md.val[1001], "later") == 0);
    CHECK(!md.has[1003]);
    CHECK(md.has[999] && md.has[2001]); /* outside the range: untouched */
    /* only the files over [1000, 2000) were rewritten */
    CHECK(res.n_removes <= 4);
    free(c);
    mtest_close(&x);
}

/* Another writer's rows, appended as they come (id, val, lsn; lsn < 0:
 * NULL), one file. */
typedef struct {
    int id;
    const char *val;
    int64_t lsn;
} frow;

static void append_foreign(mtest *x, const frow *rows, int n) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_schema *ss = silver_schema();
    mcdc_batch *b;
    mcdc_batch_create(&b, ss, n, &e);
    for (int i = 0; i < n; i++) {
        char l[23];
        lsn_text(l, rows[i].lsn);
        mcdc_col_append_int(&b->columns[0], rows[i].id, &e);
        mcdc_col_append_bytes(&b->columns[1], rows[i].val, (int64_t)strlen(rows[i].val), &e);
        if (rows[i].lsn < 0) mcdc_col_append_null(&b->columns[2], &e);
        else mcdc_col_append_bytes(&b->columns[2], l, 22, &e);
        mcdc_col_append_int(&b->columns[3], 0, &e);
    }
    mcdc_batch_seal(b, &e);
    mcdc_appender *a;
    mcdc_appender_open(&a, x->t, ss, NULL, &e);
    mcdc_appender_write(a, b, &e);
    bool sk;
    int64_t ver;
    CHECK_EQ_INT(mcdc_appender_commit(a, NULL, 0, NULL, &sk, &ver, &e), MCDC_OK);
    mcdc_appender_free(a);
    mcdc_batch_free(b);
    mcdc_schema_unref(ss);
}

static bool foreign_to_fold(mtest *x) {
    mcdc_table_view *v = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    static const char *const keys[1] = {"id"};
    bool fold = false;
    CHECK_EQ_INT(mcdc_table_view_open(&v, x->t, -1, &e), MCDC_OK);
    CHECK_EQ_INT(silver_merge_foreign(x->t, v, keys, 1, &fold, &e), MCDC_OK);
    mcdc_table_view_free(v);
    return fold;
}

/* Silver of ids 0..2999, "ours" at LSN 10, and the model of it. */
static void merge_ours(mtest *x, model *md) {
    mcdc_error e = MCDC_ERROR_INIT;
    memset(md, 0, sizeof *md);
    mchange *c = calloc(MODEL_IDS, sizeof *c);
    for (int i = 0; i < 3000; i++) c[i] = (mchange){i, 2, 10, "ours", 0};
    CHECK_EQ_INT(merge_changes(x, c, 3000, false, NULL, 0, NULL, &e), MCDC_OK);
    model_apply(md, c, 3000, false);
    free(c);
}

/* Another writer's files (no index entry, rows in no order, a key silver
 * also holds elsewhere): the merge reads them, finds their keys and folds
 * their rows back into clustered files. */
TEST(silver_merge_folds_in_files_another_writer_added) {
    mtest x;
    mtest_open(&x, "merge4", 600);
    mcdc_error e = MCDC_ERROR_INIT;
    static model md;
    merge_ours(&x, &md);
    /* another writer appends rows 4999, 4000, 4500 (in that order) */
    static const frow theirs[3] = {{4999, "theirs", 20}, {4000, "theirs", 20}, {4500, "theirs", 20}};
    append_foreign(&x, theirs, 3);
    for (int i = 0; i < 3; i++) {
        md.has[theirs[i].id] = true;
        strcpy(md.val[theirs[i].id], "theirs");
        md.lsn[theirs[i].id] = 20;
    }
    check_table(&x, &md);
    /* a change of one of their keys, and one of ours far from them */
    mchange two[2] = {{4000, 4, 30, "changed", 0}, {5, 1, 30, NULL, 0}};
    silver_merge_out res;
    CHECK_EQ_INT(merge_changes(&x, two, 2, false, NULL, 0, &res, &e), MCDC_OK);
    model_apply(&md, two, 2, false);
    check_table(&x, &md);
    /* the foreign file is gone, its rows in clustered files */
    silver_index ix;
    mcdc_schema *ks;
    mcdc_schema_create(&ks, 1, &e);
    mcdc_schema_set(ks, 0, "id", MCDC_TYPE_INT32, 0, 0, 0, true, &e);
    CHECK_EQ_INT(silver_index_load(&ix, x.spill, ks, &e), MCDC_OK);
    CHECK_EQ_INT(ix.n, live_files(&x));
    int unsorted = 0;
    for (int64_t i = 0; i < ix.n; i++) unsorted += !ix.entries[i].sorted;
    CHECK_EQ_INT(unsorted, 0);
    silver_index_clear(&ix);
    mcdc_schema_unref(ks);
    mtest_close(&x);
}

/* Keys another writer repeats (rows of keys silver holds; a key twice in
 * its own file, in order and not) are held once after a merge with no
 * change: the row with the newest _start_lsn up to silver's position, a
 * tie or none keeping apply's own. silver_merge_foreign says such files
 * are there until a merge folds them. */
TEST(silver_merge_holds_a_key_another_writer_repeats_once) {
    mtest x;
    mtest_open(&x, "merge5", 600);
    x.has_position = true;
    x.position = 50;
    mcdc_error e = MCDC_ERROR_INIT;
    static model md;
    merge_ours(&x, &md);
    CHECK(!foreign_to_fold(&x));
    static const frow theirs[] = {
        {4100, "x2", 7}, {100, "same lsn", 10}, {200, "no lsn", -1}, {300, "newer", 20},
        {400, "past the position", 99}, {4100, "x1", 5}};
    append_foreign(&x, theirs, 6);
    static const frow in_order[] = {{4200, "y1", 30}, {4200, "y2", 40}};
    append_foreign(&x, in_order, 2);
    CHECK(foreign_to_fold(&x));
    silver_merge_out res;
    CHECK_EQ_INT(merge_changes(&x, NULL, 0, false, NULL, 0, &res, &e), MCDC_OK);
    CHECK_EQ_INT(res.duplicates, 6);
    const struct { int id; const char *val; int64_t lsn; } want[] = {
        {300, "newer", 20}, {4100, "x2", 7}, {4200, "y2", 40}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        md.has[want[i].id] = true;
        snprintf(md.val[want[i].id], sizeof md.val[0], "%s", want[i].val);
        md.lsn[want[i].id] = want[i].lsn;
    }
    check_table(&x, &md); /* 100, 200 and 400 stay ours */
    CHECK(!foreign_to_fold(&x));
    mtest_close(&x);
}

/* Every storage call of a merge and its commit fails in turn: each failing
 * run returns an error, leaves the table at its old state or (a failure
 * after the commit was published) the new one, never between; a clean
 * rerun then gives the new state. */
TEST(silver_merge_survives_a_failure_of_any_storage_call) {
    mtest x;
    mtest_open(&x, "merge5", 300);
    mcdc_error e = MCDC_ERROR_INIT;
    static model md, before;
    memset(&md, 0, sizeof md);
    mchange *c = gen_changes(2500, 17u, 100, NULL);
    CHECK_EQ_INT(merge_changes(&x, c, 2500, false, NULL, 0, NULL, &e), MCDC_OK);
    model_apply(&md, c, 2500, false);
    free(c);
    mchange *d = gen_changes(900, 99u, 5000, NULL);
    before = md;
    static model after;
    after = md;
    model_apply(&after, d, 900, false);
    /* how many storage calls a clean merge makes */
    int64_t calls0 = mcdc_storage_mem_calls(x.m, MCDC_STORAGE_OP_ANY);
    const mcdc_log_sink *host = mcdc_log_use(&mcdc_test_quiet);
    int failures = 0, published = 0;
    for (int64_t nth = 1;; nth += mcdc_test_fault_step) {
        /* put the table back to its state before the merge */
        mtest_close(&x);
        mtest_open(&x, "merge5b", 300);
        mchange *c2 = gen_changes(2500, 17u, 100, NULL);
        merge_changes(&x, c2, 2500, false, NULL, 0, NULL, &e);
        free(c2);
        int64_t start = mcdc_storage_mem_calls(x.m, MCDC_STORAGE_OP_ANY);
        mcdc_storage_mem_fail_nth(x.m, MCDC_STORAGE_OP_ANY, nth, MCDC_E_IO);
        mcdc_error fe = MCDC_ERROR_INIT;
        int rc = merge_changes(&x, d, 900, false, NULL, 0, NULL, &fe);
        bool fired = mcdc_storage_mem_fault_fired(x.m);
        mcdc_storage_mem_fail_nth(x.m, MCDC_STORAGE_OP_ANY, 0, 0);
        if (!fired) {
            CHECK_EQ_INT(rc, MCDC_OK);
            check_table(&x, &after);
            break;
        }
        failures += rc != MCDC_OK;
        /* old or new, whole */
        mcdc_batch *all = NULL;
        int64_t v;
        mcdc_error re = MCDC_ERROR_INIT;
        CHECK_EQ_INT(mcdc_table_read_all(x.t, &all, &v, &re), MCDC_OK);
        int64_t rows = all ? all->rows : 0, want_old = 0, want_new = 0;
        for (int id = 0; id < MODEL_IDS; id++) want_old += before.has[id], want_new += after.has[id];
        mcdc_batch_free(all);
        bool is_new = rows == want_new && rc == MCDC_OK;
        if (rc != MCDC_OK) {
            /* a failed run may still have published its commit (a failure
             * after it is only logged): then it is the new state */
            if (rows == want_new && want_new != want_old) published++, check_table(&x, &after);
            else check_table(&x, &before);
        } else {
            check_table(&x, is_new ? &after : &before);
        }
        /* a clean rerun completes it */
        CHECK_EQ_INT(merge_changes(&x, d, 900, false, NULL, 0, NULL, &e), MCDC_OK);
        check_table(&x, &after);
        (void)start;
        if (nth > 400) break; /* far more calls than a merge makes */
    }
    mcdc_log_use(host);
    CHECK(failures * mcdc_test_fault_step > 10);
    (void)calls0;
    (void)published;
    free(d);
    mtest_close(&x);
}

/* ---- apply over a bronze written by hand ----------------------------------------------- */

#include <unistd.h>
#include "mssqlcdc.h"

/* bronze rows: lsn, seq, op, cmd, id (INT32_MIN: NULL), name; extra: a column
 * a newer capture instance added (NULL: not in this commit's schema) */
typedef struct {
    int64_t lsn, seq;
    int op, cmd, id;
    const char *name;
} brow;

/* Commits batch b (schema s; both freed) to the bronze table at path. */
static void commit_bronze(const char *path, mcdc_schema *s, mcdc_batch *b) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_batch_seal(b, &e);
    mcdc_table *t;
    mcdc_table_open(&t, path, NULL, &e);
    mcdc_table_props props = {.kind = MCDC_KIND_BRONZE};
    mcdc_appender *a;
    mcdc_appender_open(&a, t, s, &props, &e);
    mcdc_appender_write(a, b, &e);
    bool sk;
    int64_t v;
    int rc = mcdc_appender_commit(a, NULL, 0, NULL, &sk, &v, &e);
    if (rc) fprintf(stderr, "  bronze append: %s\n", e.message);
    CHECK_EQ_INT(rc, MCDC_OK);
    mcdc_appender_free(a);
    mcdc_table_close(t);
    mcdc_batch_free(b);
    mcdc_schema_unref(s);
}

static void append_bronze(const char *path, const brow *rows, int n, const char *extra) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_schema *s;
    int nf = extra ? 12 : 11;
    mcdc_schema_create(&s, nf, &e);
    int k = 0;
    mcdc_schema_set(s, k++, "_capture_instance", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    mcdc_schema_set(s, k++, "_start_lsn", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    mcdc_schema_set(s, k++, "_seqval", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    mcdc_schema_set(s, k++, "_operation", MCDC_TYPE_INT32, 0, 0, 0, true, &e);
    mcdc_schema_set(s, k++, "_command_id", MCDC_TYPE_INT32, 0, 0, 0, true, &e);
    mcdc_schema_set(s, k++, "_commit_ts", MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0, true, &e);
    mcdc_schema_set(s, k++, "id", MCDC_TYPE_INT32, 0, 0, 0, true, &e);
    mcdc_schema_set(s, k++, "name", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    if (extra) mcdc_schema_set(s, k++, "extra", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    mcdc_schema_set(s, k++, "_batch_id", MCDC_TYPE_INT32, 0, 0, 0, true, &e);
    mcdc_schema_set(s, k++, "_snapshot", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    mcdc_schema_set(s, k++, "_chunk", MCDC_TYPE_INT32, 0, 0, 0, true, &e);
    mcdc_batch *b;
    mcdc_batch_create(&b, s, n, &e);
    for (int i = 0; i < n; i++) {
        char l[23], q[23];
        lsn_text(l, rows[i].lsn);
        lsn_text(q, rows[i].seq);
        int c = 0;
        mcdc_col_append_bytes(&b->columns[c++], "dbo_t", 5, &e);
        mcdc_col_append_bytes(&b->columns[c++], l, 22, &e);
        if (rows[i].op == 0) mcdc_col_append_null(&b->columns[c++], &e);
        else mcdc_col_append_bytes(&b->columns[c++], q, 22, &e);
        mcdc_col_append_int(&b->columns[c++], rows[i].op, &e);
        if (rows[i].op == 0) mcdc_col_append_null(&b->columns[c++], &e);
        else mcdc_col_append_int(&b->columns[c++], rows[i].cmd, &e);
        mcdc_col_append_int(&b->columns[c++], rows[i].lsn * 1000000, &e);
        if (rows[i].id == INT32_MIN) mcdc_col_append_null(&b->columns[c++], &e);
        else mcdc_col_append_int(&b->columns[c++], rows[i].id, &e);
        mcdc_col_append_bytes(&b->columns[c++], rows[i].name, (int64_t)strlen(rows[i].name), &e);
        if (extra) mcdc_col_append_bytes(&b->columns[c++], extra, (int64_t)strlen(extra), &e);
        mcdc_col_append_int(&b->columns[c++], 0, &e);
        if (rows[i].op == 0) mcdc_col_append_bytes(&b->columns[c++], l, 22, &e);
        else mcdc_col_append_null(&b->columns[c++], &e);
        mcdc_col_append_null(&b->columns[c++], &e);
    }
    commit_bronze(path, s, b);
}

static char *silver_dir(void) {
    char tmpl[] = "/tmp/mcdc_silver_XXXXXX";
    char *d = mkdtemp(tmpl);
    return d ? strdup(d) : NULL;
}

/* apply of SCD type scd (0: the default), tracking the history of track[0..n_track) */
static int run_apply_scd(const char *dir, bool facts, int scd, const char *const *track, int n_track,
                         mcdc_apply_result *r, mcdc_error *e) {
    char bronze[600], silver[600], control[600], fact[600];
    snprintf(bronze, sizeof bronze, "%s/bronze", dir);
    snprintf(silver, sizeof silver, "%s/silver", dir);
    snprintf(control, sizeof control, "%s/control", dir);
    snprintf(fact, sizeof fact, "%s/facts", dir);
    static const char *const keys[1] = {"id"};
    mcdc_apply_cfg cfg = MCDC_APPLY_CFG_INIT;
    cfg.bronze = bronze;
    cfg.target = silver;
    cfg.control_table = control;
    cfg.facts_table = facts ? fact : NULL;
    cfg.capture_instance = "dbo_t";
    cfg.keys = keys;
    cfg.n_keys = 1;
    cfg.log_level = MCDC_LOG_ERROR;
    cfg.scd_type = scd;
    cfg.track_history_columns = track;
    cfg.n_track_history_columns = n_track;
    mcdc_apply *a = NULL;
    int rc = mcdc_apply_create(&a, NULL, &cfg, e);
    if (rc == MCDC_OK) rc = mcdc_apply_run(a, NULL, NULL, r, e);
    mcdc_apply_free(a);
    return rc;
}

static int run_apply(const char *dir, bool facts, mcdc_apply_result *r, mcdc_error *e) {
    return run_apply_scd(dir, facts, 0, NULL, 0, r, e);
}

/* silver's rows as "id=name[/extra]@lsn" sorted by id (NULL id first) */
static void silver_text(const char *dir, char *out, size_t cap) {
    char path[600];
    snprintf(path, sizeof path, "%s/silver", dir);
    mcdc_table *t;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_table_open(&t, path, NULL, &e);
    mcdc_batch *b = NULL;
    int64_t v;
    mcdc_table_read_all(t, &b, &v, &e);
    out[0] = 0;
    int32_t ci = b ? mcdc_schema_find(b->schema, "id") : -1, cn = b ? mcdc_schema_find(b->schema, "name") : -1,
            cx = b ? mcdc_schema_find(b->schema, "extra") : -1, cl = b ? mcdc_schema_find(b->schema, "_start_lsn") : -1;
    /* order by id: small tables, selection sort */
    int64_t n = b ? b->rows : 0;
    bool *done = calloc((size_t)(n ? n : 1), 1);
    for (int64_t k = 0; k < n; k++) {
        int64_t best = -1;
        for (int64_t r = 0; r < n; r++) {
            if (done[r]) continue;
            mcdc_cell a = mcdc_row_get(b, r, ci);
            if (best < 0) { best = r; continue; }
            mcdc_cell bb = mcdc_row_get(b, best, ci);
            if ((a.kind == MCDC_CELL_NULL && bb.kind != MCDC_CELL_NULL) ||
                (a.kind == MCDC_CELL_INT && bb.kind == MCDC_CELL_INT && a.i < bb.i))
                best = r;
        }
        done[best] = true;
        mcdc_cell id = mcdc_row_get(b, best, ci), nm = mcdc_row_get(b, best, cn), l = mcdc_row_get(b, best, cl);
        char one[160];
        char idt[16];
        if (id.kind == MCDC_CELL_INT) snprintf(idt, sizeof idt, "%lld", (long long)id.i);
        else snprintf(idt, sizeof idt, "null");
        char lt[21] = "";
        if (l.kind == MCDC_CELL_TEXT && l.i == 22) memcpy(lt, l.s + 2, 20);
        long long lv = lt[0] ? strtoll(lt, NULL, 16) : -1;
        if (cx >= 0) {
            mcdc_cell x = mcdc_row_get(b, best, cx);
            snprintf(one, sizeof one, "%s=%.*s/%.*s@%lld ", idt, (int)nm.i, nm.s,
                     x.kind == MCDC_CELL_TEXT ? (int)x.i : 1, x.kind == MCDC_CELL_TEXT ? x.s : "-", lv);
        } else {
            snprintf(one, sizeof one, "%s=%.*s@%lld ", idt, (int)nm.i, nm.s, lv);
        }
        strncat(out, one, cap - strlen(out) - 1);
    }
    free(done);
    mcdc_batch_free(b);
    mcdc_table_close(t);
}

TEST(silver_apply_ranks_every_kind_of_change_and_takes_new_columns) {
    char *dir = silver_dir();
    char bronze[600];
    snprintf(bronze, sizeof bronze, "%s/bronze", dir);
    const brow first[] = {
        /* commit 1: three inserts */
        {1, 1, 2, 1, 1, "a"}, {1, 2, 2, 1, 2, "b"}, {1, 3, 2, 1, 3, "c"}, {1, 4, 2, 1, 4, "d"},
        /* commit 2: an update (3 then 4: the 4 wins), a key update (1 of the old
         * key, 2 of the new), an update that moves a row in place (3 of id 4,
         * 4 of id 40: the 3 is the old key's latest) */
        {2, 1, 3, 1, 1, "a"}, {2, 1, 4, 1, 1, "a2"}, {2, 2, 1, 2, 2, "b"}, {2, 3, 2, 2, 20, "b"},
        {2, 4, 3, 3, 4, "d"}, {2, 4, 4, 3, 40, "d"},
        /* commit 3: delete and insert again in one transaction: command 2 last */
        {3, 1, 1, 1, 3, "c"}, {3, 2, 2, 2, 3, "c3"},
        /* a NULL key, inserted then updated */
        {4, 1, 2, 1, INT32_MIN, "n1"}, {5, 1, 4, 1, INT32_MIN, "n2"},
    };
    append_bronze(bronze, first, (int)(sizeof first / sizeof first[0]), NULL);
    mcdc_apply_result r = {.size = sizeof r};
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(run_apply(dir, false, &r, &e), MCDC_OK);
    CHECK(r.bronze_found && r.rebuilt && r.has_applied_lsn);
    CHECK_EQ_STR(r.applied_lsn, "0x00000000000000000005");
    CHECK(!r.has_finalized_until); /* no facts table: never advanced */
    char text[512];
    silver_text(dir, text, sizeof text);
    CHECK_EQ_STR(text, "null=n2@5 1=a2@2 3=c3@3 20=b@2 40=d@2 ");
    /* a column the newer capture instance added, and a reapply from behind */
    const brow second[] = {{6, 1, 4, 1, 1, "a3"}, {6, 2, 2, 1, 7, "g"}};
    append_bronze(bronze, second, 2, "E");
    CHECK_EQ_INT(run_apply(dir, false, &r, &e), MCDC_OK);
    CHECK(!r.rebuilt);
    CHECK_EQ_INT(r.inserted, 1);
    CHECK_EQ_INT(r.updated, 1);
    silver_text(dir, text, sizeof text);
    CHECK_EQ_STR(text, "null=n2/-@5 1=a3/E@6 3=c3/-@3 7=g/E@6 20=b/-@2 40=d/-@2 ");
    /* the same again: nothing new, nothing committed */
    int64_t version = r.silver_version;
    CHECK_EQ_INT(run_apply(dir, false, &r, &e), MCDC_OK);
    CHECK_EQ_INT(r.passes, 0);
    CHECK_EQ_INT(r.silver_version, version);
    /* with a verdict for bronze and a facts table: silver's follows */
    char control[600];
    snprintf(control, sizeof control, "%s/control", dir);
    mcdc_verdict v;
    CHECK_EQ_INT(mcdc_verdict_advance(&v, control, NULL, bronze, "0x00000000000000000006",
                                      7200000000LL + 61000000, MCDC_GRANULARITY_HOUR, &e), MCDC_OK);
    CHECK_EQ_INT(run_apply(dir, true, &r, &e), MCDC_OK);
    CHECK(r.has_finalized_until);
    CHECK_EQ_INT(r.finalized_until_us, 7200000000LL);
    char json[MCDC_APPLY_RESULT_JSON_SIZE];
    CHECK_EQ_INT(mcdc_apply_result_json(json, sizeof json, &r, &e), MCDC_OK);
    CHECK(strstr(json, "\"finalized_until\":\"1970-01-01T02:00:00.000\"") != NULL);
    CHECK(strstr(json, "{\"rebuilt\":false,\"applied_lsn\":\"0x00000000000000000006\"") == json);
    char small[8];
    CHECK_EQ_INT(mcdc_apply_result_json(small, sizeof small, &r, &e), MCDC_E_LIMIT);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    free(dir);
}

TEST(silver_apply_refuses_what_it_cannot_apply) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_apply *a = NULL;
    mcdc_apply_cfg cfg = MCDC_APPLY_CFG_INIT;
    CHECK_EQ_INT(mcdc_apply_create(&a, NULL, &cfg, &e), MCDC_E_INVALID);
    cfg.bronze = "/tmp/x/bronze";
    cfg.target = "/tmp/x/silver";
    cfg.control_table = "/tmp/x/control";
    CHECK_EQ_INT(mcdc_apply_create(&a, NULL, &cfg, &e), MCDC_E_INVALID); /* no capture instance */
    cfg.capture_instance = "dbo_t";
    CHECK_EQ_INT(mcdc_apply_create(&a, NULL, &cfg, &e), MCDC_E_INVALID); /* no keys, no source */
    CHECK(strstr(e.message, "key") != NULL);
    static const char *const keys[1] = {"id"};
    cfg.keys = keys;
    cfg.n_keys = 1;
    cfg.trigger = MCDC_TRIGGER_PROCESSING_TIME;
    CHECK_EQ_INT(mcdc_apply_create(&a, NULL, &cfg, &e), MCDC_E_INVALID); /* no interval */
    cfg.trigger = MCDC_TRIGGER_ONCE;
    CHECK_EQ_INT(mcdc_apply_create(&a, NULL, &cfg, &e), MCDC_OK);
    mcdc_apply_free(a);
    mcdc_apply_free(NULL);
    /* a key bronze does not capture; a bronze row of another instance */
    char *dir = silver_dir();
    char bronze[600];
    snprintf(bronze, sizeof bronze, "%s/bronze", dir);
    const brow rows[] = {{1, 1, 2, 1, 1, "a"}};
    append_bronze(bronze, rows, 1, NULL);
    mcdc_apply_result r = {.size = sizeof r};
    CHECK_EQ_INT(run_apply(dir, false, &r, &e), MCDC_OK);
    char silver[600], control[600];
    snprintf(silver, sizeof silver, "%s/silver", dir);
    snprintf(control, sizeof control, "%s/control", dir);
    static const char *const nope[1] = {"nope"};
    mcdc_apply_cfg c2 = MCDC_APPLY_CFG_INIT;
    c2.bronze = bronze;
    c2.target = silver;
    c2.control_table = control;
    c2.capture_instance = "dbo_t";
    c2.keys = nope;
    c2.n_keys = 1;
    c2.log_level = MCDC_LOG_ERROR;
    CHECK_EQ_INT(mcdc_apply_create(&a, NULL, &c2, &e), MCDC_OK);
    const brow more[] = {{2, 1, 2, 1, 2, "b"}};
    append_bronze(bronze, more, 1, NULL);
    CHECK_EQ_INT(mcdc_apply_run(a, NULL, NULL, &r, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "nope") != NULL);
    mcdc_apply_free(a);
    c2.keys = keys;
    c2.capture_instance = "dbo_other";
    CHECK_EQ_INT(mcdc_apply_create(&a, NULL, &c2, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_apply_run(a, NULL, NULL, &r, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "capture instance 'dbo_t'") != NULL);
    mcdc_apply_free(a);
    /* bronze and silver one table */
    c2.capture_instance = "dbo_t";
    c2.target = bronze;
    CHECK_EQ_INT(mcdc_apply_create(&a, NULL, &c2, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_apply_run(a, NULL, NULL, &r, &e), MCDC_E_MISMATCH);
    mcdc_apply_free(a);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    free(dir);
}

/* ---- the index format ---------------------------------------------------------------- */

TEST(silver_index_round_trips_and_refuses_damage) {
    mcdc_error e = MCDC_ERROR_INIT;
    silver_index ix = {0};
    ix.n_keys = 1;
    ix.key_names = mcdc_calloc(1, sizeof(char *));
    ix.key_types = mcdc_calloc(1, sizeof(mcdc_type_id));
    ix.key_names[0] = mcdc_strdup("id");
    ix.key_types[0] = MCDC_TYPE_INT64;
    ix.built_at = 42;
    for (int i = 0; i < 3; i++) {
        silver_entry en = {0};
        char path[32];
        snprintf(path, sizeof path, "part-%d.parquet", 2 - i);
        en.path = mcdc_strdup(path);
        en.rows = 10 + i;
        en.min_key = mcdc_malloc(2);
        en.max_key = mcdc_malloc(3);
        memcpy(en.min_key, "\x01\x02", 2);
        memcpy(en.max_key, "\x01\x02\x05", 3);
        en.min_len = 2;
        en.max_len = 3;
        en.sorted = i != 1;
        en.has_min_lsn = i == 2;
        if (i == 1) {
            uint64_t h[2] = {silver_hash("a", 1), silver_hash("b", 1)};
            silver_bloom_build(&en.bloom, h, 2, &e);
        }
        CHECK_EQ_INT(silver_index_add(&ix, &en, &e), MCDC_OK);
    }
    silver_index_sort(&ix);
    CHECK_EQ_STR(ix.entries[0].path, "part-0.parquet");
    mcdc_buf b = {0};
    CHECK_EQ_INT(silver_index_encode(&b, &ix, &e), MCDC_OK);
    silver_index back;
    CHECK_EQ_INT(silver_index_decode(&back, (const uint8_t *)b.data, b.len, &e), MCDC_OK);
    CHECK_EQ_INT(back.n, 3);
    CHECK_EQ_INT(back.built_at, 42);
    const silver_entry *f = silver_index_find(&back, "part-1.parquet");
    CHECK(f && !f->sorted && f->bloom.nbits > 0 && silver_bloom_may(&f->bloom, silver_hash("a", 1)));
    CHECK(silver_index_find(&back, "part-9.parquet") == NULL);
    silver_index_clear(&back);
    /* a flipped byte, a cut file, another file's bytes: refused, saying why */
    for (size_t at = 0; at < b.len; at += 7) {
        ((uint8_t *)b.data)[at] ^= 0x40;
        CHECK_EQ_INT(silver_index_decode(&back, (const uint8_t *)b.data, b.len, &e), MCDC_E_CORRUPT);
        ((uint8_t *)b.data)[at] ^= 0x40;
    }
    CHECK_EQ_INT(silver_index_decode(&back, (const uint8_t *)b.data, b.len - 5, &e), MCDC_E_CORRUPT);
    CHECK(strstr(e.message, "silver key index") != NULL);
    CHECK_EQ_INT(silver_index_decode(&back, (const uint8_t *)"PAR1xxxxxxxxxxxxxxxx", 20, &e), MCDC_E_CORRUPT);
    mcdc_buf_free(&b);
    silver_index_clear(&ix);
}

/* ---- gathers (mcdc_col_take, _take_range, _gather) ----------------------------------- */

TEST(silver_gathers_copy_values_and_nulls_of_every_width) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_schema *s;
    mcdc_schema_create(&s, 3, &e);
    mcdc_schema_set(s, 0, "b", MCDC_TYPE_BOOL, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 1, "t", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 2, "d", MCDC_TYPE_DECIMAL, 20, 2, 0, true, &e);
    mcdc_batch *src[2];
    for (int k = 0; k < 2; k++) {
        mcdc_batch_create(&src[k], s, 8, &e);
        for (int r = 0; r < 8; r++) {
            bool null = (r + k) % 3 == 0;
            char t[32];
            snprintf(t, sizeof t, "%d-%d", k, r);
            if (null) {
                for (int c = 0; c < 3; c++) mcdc_col_append_null(&src[k]->columns[c], &e);
            } else {
                mcdc_col_append_bool(&src[k]->columns[0], r % 2, &e);
                mcdc_col_append_bytes(&src[k]->columns[1], t, (int64_t)strlen(t), &e);
                mcdc_col_append_decimal(&src[k]->columns[2], (uint64_t)(r * 100 + k), 0, &e);
            }
        }
        mcdc_batch_seal(src[k], &e);
    }
    mcdc_batch *out;
    mcdc_batch_create(&out, s, 1, &e);
    static const int32_t idx[3] = {7, 0, 4}, which[4] = {1, 0, 1, 0}, rows[4] = {2, 3, 5, 6};
    for (int c = 0; c < 3; c++) {
        CHECK_EQ_INT(mcdc_col_take(&out->columns[c], &src[0]->columns[c], idx, 3, &e), MCDC_OK);
        CHECK_EQ_INT(mcdc_col_take_range(&out->columns[c], &src[1]->columns[c], 1, 3, &e), MCDC_OK);
        const mcdc_column *cols[2] = {&src[0]->columns[c], &src[1]->columns[c]};
        CHECK_EQ_INT(mcdc_col_gather(&out->columns[c], cols, which, rows, 4, &e), MCDC_OK);
    }
    CHECK_EQ_INT(mcdc_batch_seal(out, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_batch_validate(out, &e), MCDC_OK);
    /* every value where it came from: (batch, row) in order */
    const int from_k[10] = {0, 0, 0, 1, 1, 1, 1, 0, 1, 0}, from_r[10] = {7, 0, 4, 1, 2, 3, 2, 3, 5, 6};
    int bad = 0;
    for (int i = 0; i < 10; i++)
        for (int c = 0; c < 3; c++) {
            const mcdc_column *x = &out->columns[c], *y = &src[from_k[i]]->columns[c];
            int64_t r = from_r[i];
            bool vx = mcdc_col_is_valid(x, i), vy = mcdc_col_is_valid(y, r);
            bad += vx != vy;
            if (!vx || !vy) continue;
            if (c == 0) bad += ((x->values[i >> 3] >> (i & 7)) & 1) != ((y->values[r >> 3] >> (r & 7)) & 1);
            else if (c == 1)
                bad += x->offsets[i + 1] - x->offsets[i] != y->offsets[r + 1] - y->offsets[r] ||
                       memcmp(x->data + x->offsets[i], y->data + y->offsets[r],
                              (size_t)(x->offsets[i + 1] - x->offsets[i])) != 0;
            else bad += memcmp(x->values + i * 16, y->values + r * 16, 16) != 0;
        }
    CHECK_EQ_INT(bad, 0);
    CHECK(out->columns[1].null_count > 0);
    /* columns of another type are refused */
    CHECK_EQ_INT(mcdc_col_take(&out->columns[0], &src[0]->columns[1], idx, 1, &e), MCDC_E_SCHEMA);
    mcdc_batch_free(out);
    mcdc_batch_free(src[0]);
    mcdc_batch_free(src[1]);
    mcdc_schema_unref(s);
}

/* ---- SCD type 2 --------------------------------------------------------------------- */

static long long lsn_num(mcdc_cell c) {
    char t[21] = "";
    if (c.kind != MCDC_CELL_TEXT || c.i != 22) return -1;
    memcpy(t, c.s + 2, 20);
    return strtoll(t, NULL, 16);
}

/* A history's rows as "id=name[/extra]@image_lsn:start-end " in (id,
 * __START_AT) order, start and end the versions' commit times in seconds
 * (bronze's _commit_ts is the LSN's number of seconds), end empty while
 * open; '!' marks an _end_lsn that disagrees with __END_AT. */
static void history_text(const char *dir, char *out, size_t cap) {
    char path[600];
    snprintf(path, sizeof path, "%s/silver", dir);
    mcdc_table *t;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_table_open(&t, path, NULL, &e);
    mcdc_batch *b = NULL;
    int64_t v;
    mcdc_table_read_all(t, &b, &v, &e);
    out[0] = 0;
    int64_t n = b ? b->rows : 0;
    int32_t ci = n ? mcdc_schema_find(b->schema, "id") : -1, cn = n ? mcdc_schema_find(b->schema, "name") : -1,
            cx = n ? mcdc_schema_find(b->schema, "extra") : -1,
            cl = n ? mcdc_schema_find(b->schema, "_start_lsn") : -1,
            cs = n ? mcdc_schema_find(b->schema, "__START_AT") : -1,
            ce = n ? mcdc_schema_find(b->schema, "__END_AT") : -1,
            cel = n ? mcdc_schema_find(b->schema, "_end_lsn") : -1;
    if (n && (cs < 0 || ce < 0 || cel < 0)) {
        snprintf(out, cap, "not a history");
        n = 0;
    }
    bool *done = calloc((size_t)(n ? n : 1), 1);
    for (int64_t k = 0; k < n; k++) {
        int64_t best = -1;
        for (int64_t r = 0; r < n; r++) {
            if (done[r]) continue;
            if (best < 0) {
                best = r;
                continue;
            }
            mcdc_cell a = mcdc_row_get(b, r, ci), bb = mcdc_row_get(b, best, ci);
            mcdc_cell sa = mcdc_row_get(b, r, cs), sb = mcdc_row_get(b, best, cs);
            if (a.i < bb.i || (a.i == bb.i && sa.i < sb.i)) best = r;
        }
        done[best] = true;
        mcdc_cell id = mcdc_row_get(b, best, ci), nm = mcdc_row_get(b, best, cn);
        mcdc_cell st = mcdc_row_get(b, best, cs), en = mcdc_row_get(b, best, ce);
        long long el = lsn_num(mcdc_row_get(b, best, cel));
        char one[200], ext[40] = "", end[32] = "";
        if (cx >= 0) {
            mcdc_cell x = mcdc_row_get(b, best, cx);
            snprintf(ext, sizeof ext, "/%.*s", x.kind == MCDC_CELL_TEXT ? (int)x.i : 1,
                     x.kind == MCDC_CELL_TEXT ? x.s : "-");
        }
        bool bad = (en.kind == MCDC_CELL_NULL) != (el < 0) ||
                   (en.kind == MCDC_CELL_INT && en.i != el * 1000000);
        if (en.kind == MCDC_CELL_INT) snprintf(end, sizeof end, "%lld", (long long)(en.i / 1000000));
        snprintf(one, sizeof one, "%lld=%.*s%s@%lld:%lld-%s%s ", (long long)id.i, (int)nm.i, nm.s, ext,
                 lsn_num(mcdc_row_get(b, best, cl)), (long long)(st.i / 1000000), end, bad ? "!" : "");
        strncat(out, one, cap - strlen(out) - 1);
    }
    free(done);
    mcdc_batch_free(b);
    mcdc_table_close(t);
}

static void rm_dir(char *dir) {
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    free(dir);
}

TEST(silver_history_keeps_a_version_per_change_and_closes_deleted_keys) {
    char *dir = silver_dir();
    char bronze[600], path[700];
    snprintf(bronze, sizeof bronze, "%s/bronze", dir);
    const brow first[] = {
        {1, 1, 2, 1, 1, "a"}, {1, 2, 2, 1, 2, "b"}, {1, 3, 2, 1, 3, "c"}, {1, 4, 2, 1, 4, "d"},
        /* an update (its 3 outranked by its 4), a key update (1 then 2) */
        {2, 1, 3, 1, 1, "a"}, {2, 1, 4, 1, 1, "a2"}, {2, 2, 1, 2, 2, "b"}, {2, 3, 2, 2, 20, "b"},
        /* a delete; two updates of one key in one transaction: one version */
        {3, 1, 1, 1, 3, "c"}, {4, 1, 4, 1, 4, "d2"}, {4, 2, 4, 2, 4, "d3"},
        /* inserted and deleted by one transaction: never seen */
        {5, 1, 2, 1, 5, "e"}, {5, 2, 1, 2, 5, "e"},
        /* deleted, then inserted again */
        {6, 1, 1, 1, 20, "b"}, {7, 1, 2, 1, 20, "b7"},
        /* deleted and inserted as it was by one transaction: the version goes on */
        {7, 2, 1, 1, 4, "d3"}, {7, 3, 2, 2, 4, "d3"},
    };
    append_bronze(bronze, first, (int)(sizeof first / sizeof first[0]), NULL);
    mcdc_apply_result r = {.size = sizeof r};
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(run_apply_scd(dir, false, 2, NULL, 0, &r, &e), MCDC_OK);
    CHECK_EQ_STR(r.applied_lsn, "0x00000000000000000007");
    char text[600], again[600];
    history_text(dir, text, sizeof text);
    CHECK_EQ_STR(text, "1=a@1:1-2 1=a2@2:2- 2=b@1:1-2 3=c@1:1-3 4=d@1:1-4 4=d3@7:4- "
                       "20=b@2:2-6 20=b7@7:7- ");
    /* more changes in a later pass: the open version is rewritten closed */
    const brow second[] = {{8, 1, 4, 1, 1, "a3"}, {8, 2, 1, 1, 4, "d3"}};
    append_bronze(bronze, second, 2, NULL);
    CHECK_EQ_INT(run_apply_scd(dir, false, 2, NULL, 0, &r, &e), MCDC_OK);
    CHECK_EQ_INT(r.inserted, 1);
    CHECK_EQ_INT(r.deleted, 1);
    history_text(dir, text, sizeof text);
    CHECK_EQ_STR(text, "1=a@1:1-2 1=a2@2:2-8 1=a3@8:8- 2=b@1:1-2 3=c@1:1-3 4=d@1:1-4 4=d3@7:4-8 "
                       "20=b@2:2-6 20=b7@7:7- ");
    /* applied again from behind (the control row lost): no version twice */
    snprintf(path, sizeof path, "rm -rf '%s/control'", dir);
    CHECK(system(path) == 0);
    CHECK_EQ_INT(run_apply_scd(dir, false, 2, NULL, 0, &r, &e), MCDC_OK);
    CHECK_EQ_STR(r.applied_lsn, "0x00000000000000000008");
    history_text(dir, again, sizeof again);
    CHECK_EQ_STR(again, text);
    /* the type is the table's: type 1 is refused, before anything is written */
    int64_t version = r.silver_version;
    CHECK_EQ_INT(run_apply_scd(dir, false, 1, NULL, 0, &r, &e), MCDC_E_MISMATCH);
    CHECK(strstr(e.message, "SCD type 2") != NULL && strstr(e.message, "--scd-type 2") != NULL);
    CHECK_EQ_INT(run_apply_scd(dir, false, 0, NULL, 0, &r, &e), MCDC_E_MISMATCH);
    snprintf(path, sizeof path, "%s/silver", dir);
    mcdc_table *t;
    mcdc_table_view *v = NULL;
    CHECK_EQ_INT(mcdc_table_open(&t, path, NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_table_view_open(&v, t, -1, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_table_view_version(v), version);
    CHECK_EQ_STR(mcdc_table_view_config(v, "mssql_cdc.scd_type"), "2");
    mcdc_table_view_free(v);
    mcdc_table_close(t);
    rm_dir(dir);
}

TEST(silver_history_refuses_another_type_and_bad_columns) {
    char *dir = silver_dir();
    char bronze[600];
    snprintf(bronze, sizeof bronze, "%s/bronze", dir);
    const brow rows[] = {{1, 1, 2, 1, 1, "a"}};
    append_bronze(bronze, rows, 1, NULL);
    mcdc_apply_result r = {.size = sizeof r};
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(run_apply(dir, false, &r, &e), MCDC_OK); /* a type 1 silver */
    CHECK_EQ_INT(run_apply_scd(dir, false, 2, NULL, 0, &r, &e), MCDC_E_MISMATCH);
    CHECK(strstr(e.message, "SCD type 1") != NULL && strstr(e.message, "--scd-type 1") != NULL);
    rm_dir(dir);
    /* bad configurations, refused at create */
    mcdc_apply *a = NULL;
    static const char *const keys[1] = {"id"}, *const track[1] = {"name"}, *const none[1] = {"nope"};
    mcdc_apply_cfg cfg = MCDC_APPLY_CFG_INIT;
    cfg.bronze = "/tmp/x/bronze";
    cfg.target = "/tmp/x/silver";
    cfg.control_table = "/tmp/x/control";
    cfg.capture_instance = "dbo_t";
    cfg.keys = keys;
    cfg.n_keys = 1;
    cfg.scd_type = 3;
    CHECK_EQ_INT(mcdc_apply_create(&a, NULL, &cfg, &e), MCDC_E_INVALID);
    cfg.scd_type = 1;
    cfg.track_history_columns = track;
    cfg.n_track_history_columns = 1;
    CHECK_EQ_INT(mcdc_apply_create(&a, NULL, &cfg, &e), MCDC_E_INVALID); /* tracking needs type 2 */
    CHECK(strstr(e.message, "scd_type 2") != NULL);
    cfg.version = 1; /* a caller of version 1: the fields after log_level are not read */
    CHECK_EQ_INT(mcdc_apply_create(&a, NULL, &cfg, &e), MCDC_OK);
    mcdc_apply_free(a);
    /* a column to track that bronze does not capture */
    dir = silver_dir();
    snprintf(bronze, sizeof bronze, "%s/bronze", dir);
    append_bronze(bronze, rows, 1, NULL);
    CHECK_EQ_INT(run_apply_scd(dir, false, 2, none, 1, &r, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "'nope'") != NULL);
    rm_dir(dir);
}

TEST(silver_history_tracks_only_the_columns_given) {
    static const char *const track[1] = {"name"};
    for (int tracked = 0; tracked < 2; tracked++) {
        char *dir = silver_dir();
        char bronze[600];
        snprintf(bronze, sizeof bronze, "%s/bronze", dir);
        const brow one[] = {{1, 1, 2, 1, 1, "a"}, {1, 2, 2, 1, 2, "b"}};
        const brow two[] = {{2, 1, 4, 1, 1, "a"}}; /* only extra changes */
        const brow three[] = {{3, 1, 4, 1, 1, "a3"}, {3, 2, 4, 1, 2, "b"}}; /* name; nothing */
        append_bronze(bronze, one, 2, "E1");
        append_bronze(bronze, two, 1, "E2");
        append_bronze(bronze, three, 2, "E2");
        mcdc_apply_result r = {.size = sizeof r};
        mcdc_error e = MCDC_ERROR_INIT;
        CHECK_EQ_INT(run_apply_scd(dir, false, 2, tracked ? track : NULL, tracked, &r, &e), MCDC_OK);
        char text[512];
        history_text(dir, text, sizeof text);
        /* an update that changes no tracked column updates the open version in
         * place: its image and _start_lsn move, __START_AT does not */
        if (tracked)
            CHECK_EQ_STR(text, "1=a/E2@2:1-3 1=a3/E2@3:3- 2=b/E2@3:1- ");
        else
            CHECK_EQ_STR(text, "1=a/E1@1:1-2 1=a/E2@2:2-3 1=a3/E2@3:3- 2=b/E1@1:1-3 2=b/E2@3:3- ");
        rm_dir(dir);
    }
}

TEST(silver_history_rebuild_closes_keys_a_newer_snapshot_lacks) {
    char *dir = silver_dir();
    char bronze[600];
    snprintf(bronze, sizeof bronze, "%s/bronze", dir);
    const brow first[] = {{1, 1, 2, 1, 1, "a"}, {1, 2, 2, 1, 2, "b"}, {1, 3, 2, 1, 3, "c"},
                          {1, 4, 2, 1, 7, "g"}};
    append_bronze(bronze, first, 4, NULL);
    mcdc_apply_result r = {.size = sizeof r};
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(run_apply_scd(dir, false, 2, NULL, 0, &r, &e), MCDC_OK);
    /* changes silver has not applied yet, then a re-snapshot at 10 (1 as it
     * is, 2 changed again, 3 gone, 4 new), then a change: the changes before
     * the snapshot keep their versions */
    const brow mid[] = {{5, 1, 4, 1, 2, "b5"}, {6, 1, 1, 1, 3, "c"}};
    append_bronze(bronze, mid, 2, NULL);
    const brow snap[] = {{10, 0, 0, 0, 1, "a"}, {10, 0, 0, 0, 2, "b10"}, {10, 0, 0, 0, 4, "d"}};
    append_bronze(bronze, snap, 3, NULL);
    const brow after[] = {{11, 1, 4, 1, 4, "d11"}};
    append_bronze(bronze, after, 1, NULL);
    CHECK_EQ_INT(run_apply_scd(dir, false, 2, NULL, 0, &r, &e), MCDC_OK);
    CHECK(r.rebuilt);
    char text[512], again[512];
    history_text(dir, text, sizeof text);
    CHECK_EQ_STR(text, "1=a@1:1- 2=b@1:1-5 2=b5@5:5-10 2=b10@10:10- 3=c@1:1-6 4=d@10:10-11 "
                       "4=d11@11:11- 7=g@1:1-10 ");
    /* the same snapshot again (the control row restored from before it) */
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/control'", dir);
    CHECK(system(cmd) == 0);
    CHECK_EQ_INT(run_apply_scd(dir, false, 2, NULL, 0, &r, &e), MCDC_OK);
    history_text(dir, again, sizeof again);
    CHECK_EQ_STR(again, text);
    rm_dir(dir);
}

TEST(silver_history_versions_of_a_key_stay_in_one_file) {
    /* many keys with many versions, small files: a key's versions never
     * straddle two files, and the table reads back whole */
    char *dir = silver_dir();
    char bronze[600];
    snprintf(bronze, sizeof bronze, "%s/bronze", dir);
    brow rows[400];
    int n = 0;
    for (int c = 1; c <= 8; c++)
        for (int id = 1; id <= 50; id++)
            rows[n++] = (brow){c, id, c == 1 ? 2 : 4, 1, id, c % 2 ? "odd" : "even"};
    append_bronze(bronze, rows, n, NULL);
    char silver[600], control[600];
    snprintf(silver, sizeof silver, "%s/silver", dir);
    snprintf(control, sizeof control, "%s/control", dir);
    static const char *const keys[1] = {"id"};
    mcdc_apply_cfg cfg = MCDC_APPLY_CFG_INIT;
    cfg.bronze = bronze;
    cfg.target = silver;
    cfg.control_table = control;
    cfg.capture_instance = "dbo_t";
    cfg.keys = keys;
    cfg.n_keys = 1;
    cfg.log_level = MCDC_LOG_ERROR;
    cfg.scd_type = 2;
    cfg.file_rows = 37;
    mcdc_apply *a = NULL;
    mcdc_apply_result r = {.size = sizeof r};
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_apply_create(&a, NULL, &cfg, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_apply_run(a, NULL, NULL, &r, &e), MCDC_OK);
    const brow more[] = {{9, 1, 4, 1, 25, "nine"}};
    append_bronze(bronze, more, 1, NULL);
    CHECK_EQ_INT(mcdc_apply_run(a, NULL, NULL, &r, &e), MCDC_OK);
    mcdc_apply_free(a);
    CHECK(r.files_written >= 1 && r.files_written < 12); /* only the file of key 25 */
    mcdc_table *t;
    mcdc_table_view *v = NULL;
    CHECK_EQ_INT(mcdc_table_open(&t, silver, NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_table_view_open(&v, t, -1, &e), MCDC_OK);
    int64_t total = 0, files = (int64_t)mcdc_table_view_file_count(v);
    bool apart = true;
    /* files by their first key: each one's keys above the one before's */
    int32_t lo[64], hi[64];
    int64_t nf = 0;
    for (size_t i = 0; i < mcdc_table_view_file_count(v) && nf < 64; i++) {
        mcdc_table_reader *rd = NULL;
        CHECK_EQ_INT(mcdc_table_reader_open(&rd, v, mcdc_table_view_file(v, i).path, NULL, 0, NULL, &e), MCDC_OK);
        mcdc_batch *b = NULL;
        lo[nf] = INT32_MAX, hi[nf] = INT32_MIN;
        while (mcdc_table_reader_next(&b, rd, &e) == MCDC_OK && b) {
            int32_t c = mcdc_schema_find(b->schema, "id");
            for (int64_t k = 0; k < b->rows; k++) {
                int32_t id = (int32_t)mcdc_row_get(b, k, c).i;
                if (id < lo[nf]) lo[nf] = id;
                if (id > hi[nf]) hi[nf] = id;
            }
            total += b->rows;
            mcdc_batch_free(b);
            b = NULL;
        }
        mcdc_table_reader_free(rd);
        nf++;
    }
    for (int64_t i = 0; i < nf; i++)
        for (int64_t j = 0; j < nf; j++)
            if (i != j && lo[i] <= hi[j] && lo[j] <= hi[i]) apart = false;
    CHECK(apart);
    CHECK(files > 4);
    CHECK_EQ_INT(total, 8 * 50 + 1);
    mcdc_table_view_free(v);
    mcdc_table_close(t);
    char text[16384];
    history_text(dir, text, sizeof text);
    CHECK(strstr(text, "25=odd@7:7-8 25=even@8:8-9 25=nine@9:9- 26=odd@1:1-2 ") != NULL);
    rm_dir(dir);
}

TEST(silver_history_counts_a_transaction_by_its_last_change_across_chunks) {
    /* 65535 keys of one row, then a key with two changes of one transaction:
     * the first ends the sorter's first chunk (SILVER_BATCH_ROWS rows), the
     * second begins the next; still one version, the second's */
    MCDC_ASSERT(SILVER_BATCH_ROWS == 65536);
    char *dir = silver_dir();
    char bronze[600];
    snprintf(bronze, sizeof bronze, "%s/bronze", dir);
    int n = SILVER_BATCH_ROWS + 1;
    brow *rows = calloc((size_t)n, sizeof *rows);
    for (int i = 0; i < n - 2; i++) rows[i] = (brow){1, i + 1, 2, 1, i + 1, "k"};
    rows[n - 2] = (brow){2, 1, 2, 1, 70000, "x"};
    rows[n - 1] = (brow){2, 2, 4, 2, 70000, "y"};
    append_bronze(bronze, rows, n, NULL);
    free(rows);
    mcdc_apply_result r = {.size = sizeof r};
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(run_apply_scd(dir, false, 2, NULL, 0, &r, &e), MCDC_OK);
    CHECK_EQ_INT(r.inserted, n - 1);
    char path[700];
    snprintf(path, sizeof path, "%s/silver", dir);
    mcdc_table *t;
    CHECK_EQ_INT(mcdc_table_open(&t, path, NULL, &e), MCDC_OK);
    mcdc_batch *b = NULL;
    int64_t v;
    CHECK_EQ_INT(mcdc_table_read_all(t, &b, &v, &e), MCDC_OK);
    int found = 0;
    int32_t ci = mcdc_schema_find(b->schema, "id"), cn = mcdc_schema_find(b->schema, "name"),
            ce = mcdc_schema_find(b->schema, "_end_lsn");
    for (int64_t i = 0; i < b->rows; i++) {
        if (mcdc_row_get(b, i, ci).i != 70000) continue;
        mcdc_cell nm = mcdc_row_get(b, i, cn);
        found++;
        CHECK(nm.kind == MCDC_CELL_TEXT && nm.i == 1 && nm.s[0] == 'y');
        CHECK(mcdc_row_get(b, i, ce).kind == MCDC_CELL_NULL);
    }
    CHECK_EQ_INT(found, 1);
    CHECK_EQ_INT(b->rows, n - 1);
    mcdc_batch_free(b);
    mcdc_table_close(t);
    rm_dir(dir);
}

/* ---- a history's waves, at the merge ------------------------------------------------- */

/* A history merged from change rows (id, val, lsn, op; op 0 a chunk row:
 * no command id, seqval or commit time), the commit time of a change its
 * LSN in seconds; stamps (LSN, seconds) a wave's, ranges its chunks'. */
typedef struct {
    int id, op;
    int64_t lsn;
    const char *val;
} hchange;

static int merge_history(mtest *x, const hchange *ch, int n, const silver_range *ranges, int n_ranges,
                         const int64_t (*stamps)[2], int n_stamps, mcdc_error *e) {
    mcdc_schema *cs = mchange_schema(), *os = NULL;
    int rc = mcdc_schema_create(&os, 7, e);
    const char *names[7] = {"id", "val", "_start_lsn", "_commit_ts", "__START_AT", "__END_AT", "_end_lsn"};
    for (int j = 0; rc == MCDC_OK && j < 7; j++)
        rc = mcdc_schema_set(os, j, names[j], cs->fields[j == 6 ? 2 : j > 3 ? 3 : j].type, 0, 0, 0, true, e);
    static const int32_t key[1] = {0};
    silver_sorter_cfg sc = {.schema = cs, .key_cols = key, .n_keys = 1, .ranked = true, .history = true,
                            .lsn_col = 2, .op_col = 4, .cmd_col = 5, .seq_col = 6,
                            .keep_tags = SILVER_TAG_BASE | SILVER_TAG_WAVE,
                            .memory_bytes = SILVER_SORT_BYTES_MIN, .spill = x->spill,
                            .spill_prefix = "_mssql_cdc_spill/h-"};
    silver_sorter *so = NULL;
    if (rc == MCDC_OK) rc = silver_sorter_create(&so, &sc, e);
    mcdc_batch *b = NULL, *st = NULL;
    uint32_t *tags = calloc((size_t)(n ? n : 1), sizeof *tags);
    if (rc == MCDC_OK) rc = mcdc_batch_create(&b, cs, n ? n : 1, e);
    for (int i = 0; rc == MCDC_OK && i < n; i++) {
        char l[23];
        lsn_text(l, ch[i].lsn);
        bool snap = ch[i].op == 0;
        mcdc_col_append_int(&b->columns[0], ch[i].id, e);
        mcdc_col_append_bytes(&b->columns[1], ch[i].val, (int64_t)strlen(ch[i].val), e);
        mcdc_col_append_bytes(&b->columns[2], l, 22, e);
        if (snap) mcdc_col_append_null(&b->columns[3], e);
        else mcdc_col_append_int(&b->columns[3], ch[i].lsn * 1000000, e);
        mcdc_col_append_int(&b->columns[4], ch[i].op, e);
        if (snap) mcdc_col_append_null(&b->columns[5], e), mcdc_col_append_null(&b->columns[6], e);
        else mcdc_col_append_int(&b->columns[5], 1, e), mcdc_col_append_bytes(&b->columns[6], l, 22, e);
        tags[i] = snap ? SILVER_TAG_WAVE : SILVER_TAG_BASE;
    }
    if (rc == MCDC_OK) rc = mcdc_batch_seal(b, e);
    if (rc == MCDC_OK) rc = silver_sorter_add(so, b, NULL, 0, tags, e);
    free(tags);
    if (rc == MCDC_OK) rc = silver_sorter_finish(so, e);
    /* the stamps: _start_lsn and _commit_ts */
    mcdc_schema *ss = NULL;
    if (rc == MCDC_OK && n_stamps > 0) {
        rc = mcdc_schema_create(&ss, 2, e);
        if (rc == MCDC_OK) rc = mcdc_schema_set(ss, 0, "_start_lsn", MCDC_TYPE_UTF8, 0, 0, 0, true, e);
        if (rc == MCDC_OK) rc = mcdc_schema_set(ss, 1, "_commit_ts", MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0, true, e);
        if (rc == MCDC_OK) rc = mcdc_batch_create(&st, ss, n_stamps, e);
        for (int i = 0; rc == MCDC_OK && i < n_stamps; i++) {
            char l[23];
            lsn_text(l, stamps[i][0]);
            mcdc_col_append_bytes(&st->columns[0], l, 22, e);
            mcdc_col_append_int(&st->columns[1], stamps[i][1] * 1000000, e);
        }
        if (rc == MCDC_OK) rc = mcdc_batch_seal(st, e);
    }
    mcdc_table_view *v = NULL;
    if (rc == MCDC_OK) rc = mcdc_table_view_open(&v, x->t, -1, e);
    static const int32_t c_of_out[7] = {0, 1, 2, 3, -1, -1, -1}, e_of_out[7] = {0, 1, 2, 3, 4, 5, 6};
    static const int32_t image[2] = {0, 1};
    static const char *const keys[1] = {"id"};
    silver_scd2 h = {.start_at = 4, .end_at = 5, .end_lsn = 6, .commit_ts = 3, .change_ts_col = 3,
                     .image = image, .n_image = 2, .tracked = image, .n_tracked = 2, .stamps = st};
    mcdc_table_props props = {.kind = MCDC_KIND_SILVER};
    silver_merge_in in = {.target = x->t, .view = v, .out_schema = os, .change_of_out = c_of_out,
                          .exist_of_out = v ? e_of_out : c_of_out, .keys = keys, .n_keys = 1,
                          .changes = so, .change_lsn_col = 2, .scd2 = &h, .ranges = ranges,
                          .n_ranges = n_ranges, .file_rows = x->file_rows,
                          .memory_bytes = SILVER_SORT_BYTES_MIN, .spill = x->spill,
                          .spill_prefix = "_mssql_cdc_spill/h-", .props = &props};
    silver_merge_out out = {0};
    if (rc == MCDC_OK) rc = silver_merge_run(&out, &in, e);
    int64_t read_version = v ? mcdc_table_view_version(v) : -1;
    if (rc == MCDC_OK && out.changed) rc = silver_index_store(x->spill, &out.index, read_version + 1, e);
    if (rc == MCDC_OK && out.changed) {
        mcdc_table_commit c = {.operation = "MERGE", .remove_paths = (const char *const *)out.removes,
                               .n_removes = out.n_removes, .read_version = read_version};
        bool skipped;
        int64_t ver;
        rc = mcdc_appender_commit_with(out.appender, &c, &skipped, &ver, e);
    }
    silver_merge_out_free(&out);
    mcdc_table_view_free(v);
    mcdc_batch_free(b);
    mcdc_batch_free(st);
    silver_sorter_free(so);
    mcdc_schema_unref(ss);
    mcdc_schema_unref(cs);
    mcdc_schema_unref(os);
    return rc;
}

/* The history as "id=val@image_lsn:start-end/end_lsn " by (id, start):
 * times in seconds, end and end_lsn empty while open. */
static void mem_history_text(mtest *x, char *out, size_t cap) {
    mcdc_batch *b = NULL;
    int64_t v;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_table_read_all(x->t, &b, &v, &e), MCDC_OK);
    out[0] = 0;
    int64_t n = b ? b->rows : 0;
    bool *done = calloc((size_t)(n ? n : 1), 1);
    for (int64_t k = 0; k < n; k++) {
        int64_t best = -1;
        for (int64_t r = 0; r < n; r++) {
            if (done[r]) continue;
            mcdc_cell a = mcdc_row_get(b, r, 0), sa = mcdc_row_get(b, r, 4);
            if (best >= 0) {
                mcdc_cell bb = mcdc_row_get(b, best, 0), sb = mcdc_row_get(b, best, 4);
                if (a.i > bb.i || (a.i == bb.i && sa.i >= sb.i)) continue;
            }
            best = r;
        }
        done[best] = true;
        mcdc_cell id = mcdc_row_get(b, best, 0), val = mcdc_row_get(b, best, 1);
        mcdc_cell s = mcdc_row_get(b, best, 4), en = mcdc_row_get(b, best, 5);
        char one[128], start[24] = "null", end[48] = "";
        long long el = lsn_num(mcdc_row_get(b, best, 6));
        if (el >= 0) snprintf(end, sizeof end, "%lld/%lld", (long long)(en.i / 1000000), el);
        if (s.kind == MCDC_CELL_INT) snprintf(start, sizeof start, "%lld", (long long)(s.i / 1000000));
        snprintf(one, sizeof one, "%lld=%.*s@%lld:%s-%s ", (long long)id.i, (int)val.i, val.s,
                 lsn_num(mcdc_row_get(b, best, 2)), start, end);
        strncat(out, one, cap - strlen(out) - 1);
    }
    free(done);
    mcdc_batch_free(b);
}

TEST(silver_history_wave_opens_and_closes_versions_at_its_chunk_stamps) {
    mtest x;
    mtest_open(&x, "hwave", 3);
    mcdc_error e = MCDC_ERROR_INIT;
    const hchange first[] = {{1, 2, 10, "a"}, {2, 2, 10, "b"}, {3, 2, 10, "c"}, {4, 2, 10, "d"},
                             {5, 2, 10, "e"}, {8, 2, 10, "h"}, {9, 2, 10, "i"}};
    CHECK_EQ_INT(merge_history(&x, first, 7, NULL, 0, NULL, 0, &e), MCDC_OK);
    /* applied before the wave, after its stamp 50: key 1 changed, key 6 inserted */
    const hchange mid[] = {{1, 4, 55, "a55"}, {6, 2, 55, "g"}};
    CHECK_EQ_INT(merge_history(&x, mid, 2, NULL, 0, NULL, 0, &e), MCDC_OK);
    /* the wave: chunk [0, 8) stamped 50 (its commit time 49 s), chunk [9, 10)
     * stamped 52 (51 s); key 0 new, 1 older than its version (kept), 2
     * differs, 3 and 6 absent (3 closed, 6 newer: kept), 4 as it is and
     * changed at 60 after the stamp, 5 as it is; 8 lies in no range; 9's
     * chunk lacks it */
    const hchange wave[] = {{0, 0, 50, "z"}, {1, 0, 50, "a"}, {2, 0, 50, "b50"}, {4, 0, 50, "d"},
                            {4, 4, 60, "d60"}, {5, 0, 50, "e"}, {1, 4, 55, "a55"}};
    silver_range rg[2] = {{true, true, 0, 8, {0}}, {true, true, 9, 10, {0}}};
    silver_lsn_parse(rg[0].stamp, "0x00000000000000000032", 22); /* 50 */
    silver_lsn_parse(rg[1].stamp, "0x00000000000000000034", 22); /* 52 */
    const int64_t stamps[2][2] = {{50, 49}, {52, 51}};
    CHECK_EQ_INT(merge_history(&x, wave, 7, rg, 2, stamps, 2, &e), MCDC_OK);
    char text[512], again[512];
    mem_history_text(&x, text, sizeof text);
    CHECK_EQ_STR(text, "0=z@50:49- 1=a@10:10-55/55 1=a55@55:55- 2=b@10:10-49/50 2=b50@50:49- "
                       "3=c@10:10-49/50 4=d@10:10-60/60 4=d60@60:60- 5=e@10:10- 6=g@55:55- "
                       "8=h@10:10- 9=i@10:10-51/52 ");
    /* the same wave again (a replay planned afresh): nothing changes */
    CHECK_EQ_INT(merge_history(&x, wave, 7, rg, 2, stamps, 2, &e), MCDC_OK);
    mem_history_text(&x, again, sizeof again);
    CHECK_EQ_STR(again, text);
    mtest_close(&x);
}

/* ---- the capture instances bronze names (mcdc_silver_source.c) ---------------------- */

typedef struct {
    const char *ci;
    int64_t lsn;
} ci_row;

/* One commit (one file) of rows naming capture instances. */
static void append_instances(const char *path, const ci_row *rows, int n) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_schema *s;
    mcdc_schema_create(&s, 2, &e);
    mcdc_schema_set(s, 0, "_capture_instance", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 1, "_start_lsn", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    mcdc_batch *b;
    mcdc_batch_create(&b, s, n, &e);
    for (int i = 0; i < n; i++) {
        char l[23];
        lsn_text(l, rows[i].lsn);
        mcdc_col_append_bytes(&b->columns[0], rows[i].ci, (int64_t)strlen(rows[i].ci), &e);
        mcdc_col_append_bytes(&b->columns[1], l, 22, &e);
    }
    commit_bronze(path, s, b);
}

static void instances_of(const char *path, silver_instances *out, int want_rc) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_table *t;
    CHECK_EQ_INT(mcdc_table_open(&t, path, NULL, &e), MCDC_OK);
    int rc = silver_bronze_instances(out, t, path, &e);
    if (rc != want_rc) fprintf(stderr, "  silver_bronze_instances: %d %s\n", rc, e.message);
    CHECK_EQ_INT(rc, want_rc);
    mcdc_table_close(t);
}

TEST(silver_bronze_instances_newest_first_from_stats_and_rows) {
    char *d = silver_dir();
    CHECK(d != NULL);
    char path[512];
    snprintf(path, sizeof path, "%s/bronze", d);
    silver_instances x;
    instances_of(path, &x, MCDC_OK); /* no bronze yet: no names */
    CHECK_EQ_INT(x.n, 0);
    CHECK(x.names == NULL);
    /* a file of one instance (its statistics say it), one of three (the
     * middle name only its rows hold), one of a name too long for exact
     * statistics */
    const ci_row one[] = {{"items_a", 1}, {"items_a", 3}, {"items_a", 2}};
    const ci_row three[] = {{"items_a", 6}, {"items_c", 7}, {"items_b", 9}, {"items_c", 4}};
    const char *longname = "items_with_a_name_longer_than_statistics_keep";
    const ci_row cut[] = {{longname, 8}, {longname, 5}};
    append_instances(path, one, 3);
    instances_of(path, &x, MCDC_OK);
    CHECK_EQ_INT(x.n, 1);
    CHECK(x.n == 1 && strcmp(x.names[0], "items_a") == 0);
    silver_instances_free(&x);
    CHECK(x.names == NULL && x.n == 0);
    append_instances(path, three, 4);
    append_instances(path, cut, 2);
    instances_of(path, &x, MCDC_OK);
    const char *want[] = {"items_b", longname, "items_c", "items_a"};
    const int64_t newest[] = {9, 8, 7, 6};
    CHECK_EQ_INT(x.n, 4);
    for (int i = 0; i < 4 && i < x.n; i++) {
        CHECK(strcmp(x.names[i], want[i]) == 0);
        char l[23], got[23];
        lsn_text(l, newest[i]);
        silver_lsn_format(got, x.newest[i]);
        CHECK(strcasecmp(got, l) == 0);
    }
    silver_instances_free(&x);
    /* more names than one table's stream could hold: refused, nothing kept */
    ci_row many[SILVER_INSTANCES_MAX + 1];
    char names[SILVER_INSTANCES_MAX + 1][16];
    for (int i = 0; i <= SILVER_INSTANCES_MAX; i++) {
        snprintf(names[i], sizeof names[i], "t_%d", i);
        many[i] = (ci_row){names[i], 100 + i};
    }
    append_instances(path, many, SILVER_INSTANCES_MAX + 1);
    instances_of(path, &x, MCDC_E_LIMIT);
    CHECK(x.n == 0 && x.names == NULL);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    CHECK_EQ_INT(system(cmd), 0);
    free(d);
}

#include "mcdc_silver_apply.h"

/* One apply run of cfg whose tables are in the test's memory store. */
static int apply_in_store(const mcdc_apply_cfg *cfg, const mcdc_storage_env *store,
                          mcdc_apply_result *r, mcdc_error *e) {
    mcdc_apply *a = NULL;
    int rc = mcdc_apply_create(&a, NULL, cfg, e);
    if (rc == MCDC_OK) {
        a->ctx.storage_own.mem_store = store->mem_store;
        a->ctx.storage_own.ctx = store->ctx;
        rc = mcdc_apply_run(a, NULL, NULL, r, e);
    }
    mcdc_apply_free(a);
    return rc;
}

/* A silver on a store other than the local disk (mem:// standing in for
 * one) spills to a local scratch directory: without one apply refuses
 * before it writes; with one the run goes on; a scratch directory that is
 * not local is refused. */
TEST(silver_apply_on_a_remote_silver_needs_a_scratch_dir) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage_mem *m = NULL;
    mcdc_storage_mem_create(&m, "remote", &e);
    mcdc_storage_env store = mcdc_storage_mem_env(m);
    static const char *const keys[1] = {"id"};
    mcdc_apply_cfg cfg = {.version = MCDC_APPLY_CFG_VERSION, .bronze = "mem://remote/bronze",
                          .target = "mem://remote/silver", .control_table = "mem://remote/control",
                          .capture_instance = "dbo_t", .keys = keys, .n_keys = 1,
                          .trigger = MCDC_TRIGGER_ONCE, .log_level = MCDC_LOG_ERROR};
    mcdc_apply_result r = {.size = sizeof r};
    CHECK_EQ_INT(apply_in_store(&cfg, &store, &r, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "mem://remote/silver is on an object store") != NULL);
    CHECK(strstr(e.message, "--scratch-dir") != NULL);
    CHECK_EQ_INT((int)mcdc_storage_mem_count(m), 0); /* nothing written */
    cfg.scratch_dir = "s3://bucket/tmp";
    CHECK_EQ_INT(apply_in_store(&cfg, &store, &r, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "not a local path") != NULL);
    char *dir = silver_dir();
    cfg.scratch_dir = dir;
    CHECK_EQ_INT(apply_in_store(&cfg, &store, &r, &e), MCDC_OK);
    CHECK(!r.bronze_found);
    rm_dir(dir);
    mcdc_storage_mem_release(m);
}
