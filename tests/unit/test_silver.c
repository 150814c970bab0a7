/* test_silver.c - silver's keys, ranks, rules and sorter (src/silver). */
#include <stdlib.h>
#include <string.h>

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

/* change rows: id, val, _start_lsn, _op, _cmd, _seq, _tag */
static mcdc_schema *change_schema(void) {
    mcdc_schema *s;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_schema_create(&s, 7, &e);
    mcdc_schema_set(s, 0, "id", MCDC_TYPE_INT32, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 1, "val", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 2, "_start_lsn", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 3, "_operation", MCDC_TYPE_INT32, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 4, "_command_id", MCDC_TYPE_INT32, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 5, "_seqval", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 6, "_tag", MCDC_TYPE_INT32, 0, 0, 0, true, &e);
    return s;
}

static void lsn_text(char out[23], int64_t n) {
    snprintf(out, 23, "0x%020llX", (unsigned long long)n);
}

static void add_change(mcdc_batch *b, int id, const char *val, int64_t lsn, int op, int cmd,
                       int64_t seq, int tag) {
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
    mcdc_col_append_int(&b->columns[6], tag, &e);
}

static silver_sorter *new_sorter(mcdc_storage *st, mcdc_schema *s, bool ranked, uint32_t keep,
                                 int64_t mem) {
    static const int32_t key[1] = {0};
    silver_sorter_cfg c = {.schema = s, .key_cols = key, .n_keys = 1, .ranked = ranked,
                           .lsn_col = 2, .op_col = 3, .cmd_col = 4, .seq_col = 5, .tag_col = 6,
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
    for (int round = 0; round < ROUNDS; round++) {
        mcdc_batch *b;
        mcdc_batch_create(&b, s, KEYS, &e);
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
            add_change(b, id, val, lsn, 3, 1, 7, tag);
            add_change(b, id, val, lsn, 4, 1, 7, tag);
        }
        mcdc_batch_seal(b, &e);
        CHECK_EQ_INT(silver_sorter_add(x, b, NULL, 0, &e), MCDC_OK);
        mcdc_batch_free(b);
    }
    CHECK_EQ_INT(silver_sorter_rows(x), (int64_t)KEYS * ROUNDS * 2);
    CHECK_EQ_INT(silver_sorter_finish(x, &e), MCDC_OK);
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
    for (int i = 0; i < N; i++) add_change(b, (i * 31) % 1000, "v", 5, 2, 0, 1, 0);
    mcdc_batch_seal(b, &e);
    int32_t *pick = malloc(N * sizeof *pick);
    int n = 0;
    for (int i = 0; i < N; i += 2) pick[n++] = i; /* half the rows */
    CHECK_EQ_INT(silver_sorter_add(x, b, pick, n, &e), MCDC_OK);
    CHECK_EQ_INT(silver_sorter_finish(x, &e), MCDC_OK);
    CHECK(silver_sorter_runs(x) >= 1);
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
