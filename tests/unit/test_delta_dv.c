/* test_delta_dv.c - deletion vectors: Z85, descriptors, the bitmap and DV
 * file formats (round trips and every kind of damage), the log and the
 * checkpoint carrying descriptors, and the table reader skipping rows. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcdc_delta_dv.h"
#include "mcdc_lake.h"
#include "mcdc_tables.h"
#include "mcdc_test.h"

/* PROTOCOL.md, "JSON Example 3 - Inline": rows 3, 4, 7, 11, 18, 29. */
#define SPEC_INLINE "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"

TEST(dv_z85_round_trip_and_bad_text) {
    uint8_t in[8] = {0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B}, back[8];
    char z[11];
    mcdc_z85_encode(z, in, 8);
    CHECK_EQ_STR(z, "HelloWorld"); /* the Z85 spec's test vector */
    CHECK(mcdc_z85_decode(back, z, 10));
    CHECK(memcmp(in, back, 8) == 0);
    CHECK(!mcdc_z85_decode(back, "Hello", 4));      /* not a multiple of 5 */
    CHECK(!mcdc_z85_decode(back, "Hel\"o", 5));     /* not a Z85 character */
    CHECK(!mcdc_z85_decode(back, "#####", 5));      /* above 32 bits */
}

TEST(dv_spec_inline_example_and_uuid_path) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_delta_dv dv = {'i', SPEC_INLINE, -1, 40, 6, -1};
    char *uid = NULL;
    CHECK_EQ_INT(mcdc_dv_check_descriptor(&uid, &dv, "add of f", &e), MCDC_OK);
    CHECK_EQ_STR(uid, "i" SPEC_INLINE);
    mcdc_free(uid);
    mcdc_dv_bitmap *b = NULL;
    CHECK_EQ_INT(mcdc_dv_inline_parse(&b, &dv, "inline", &e), MCDC_OK);
    if (b) {
        CHECK_EQ_INT(mcdc_dv_bitmap_cardinality(b), 6);
        static const int rows[] = {3, 4, 7, 11, 18, 29};
        for (int i = 0; i < 6; i++) CHECK(mcdc_dv_bitmap_contains(b, (uint64_t)rows[i]));
        CHECK(!mcdc_dv_bitmap_contains(b, 5));
        CHECK_EQ_INT(mcdc_dv_bitmap_max(b), 29);
        int32_t keep[10], n = 0;
        mcdc_dv_bitmap_keep(b, 2, 10, keep, &n); /* rows 2..11: 3, 4, 7, 11 go */
        CHECK_EQ_INT(n, 6);
        CHECK(keep[0] == 0 && keep[1] == 3 && keep[2] == 4 && keep[3] == 6 && keep[5] == 8);
        CHECK_EQ_INT(mcdc_dv_bitmap_range_count(b, 4, 12), 3);
        mcdc_buf out = {0};
        CHECK_EQ_INT(mcdc_dv_bitmap_serialize(&out, b, &e), MCDC_OK);
        mcdc_dv_bitmap *again = NULL;
        CHECK_EQ_INT(mcdc_dv_bitmap_parse(&again, out.data, out.len, "again", &e), MCDC_OK);
        CHECK(again && mcdc_dv_bitmap_cardinality(again) == 6 && mcdc_dv_bitmap_contains(again, 29));
        mcdc_dv_bitmap_free(again);
        mcdc_buf_free(&out);
    }
    mcdc_dv_bitmap_free(b);
    /* "JSON Example 1": prefix "ab", then the UUID. */
    mcdc_delta_dv u = {'u', "ab^-aqEH.-t@S}K{vb[*k^", 4, 40, 6, -1};
    char *key = NULL;
    CHECK_EQ_INT(mcdc_dv_file_key(&key, &u, &e), MCDC_OK);
    CHECK_EQ_STR(key, "ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin");
    mcdc_free(key);
    CHECK_EQ_INT(mcdc_dv_check_descriptor(&uid, &u, "add of f", &e), MCDC_OK);
    CHECK_EQ_STR(uid, "uab^-aqEH.-t@S}K{vb[*k^@4");
    mcdc_free(uid);
}

TEST(dv_bad_descriptors_are_corrupt_and_say_why) {
    mcdc_error e = MCDC_ERROR_INIT;
    char *uid = NULL;
    const struct {
        mcdc_delta_dv dv;
        const char *why;
    } cases[] = {
        {{'x', SPEC_INLINE, -1, 40, 6, -1}, "storageType"},
        {{'i', SPEC_INLINE, 1, 40, 6, -1}, "inline but has an offset"},
        {{'i', SPEC_INLINE, -1, 44, 6, -1}, "does not match sizeInBytes"},
        {{'u', "../^-aqEH.-t@S}K{vb[*k^", 1, 40, 6, -1}, "prefix"},
        {{'u', "ab^-aqEH.-t@S}K{vb[*k^", -1, 40, 6, -1}, "no offset"},
        {{'u', "ab^-aqEH.-t@S}K{vb[*k^", 1, 40, -1, -1}, "negative cardinality"},
        {{'p', "/t/x.bin", 1, 4, 1, -1}, "too small"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_EQ_INT(mcdc_dv_check_descriptor(&uid, &cases[i].dv, "add of part-7.parquet", &e),
                     MCDC_E_CORRUPT);
        CHECK(uid == NULL);
        CHECK(strstr(e.message, "part-7.parquet") && strstr(e.message, cases[i].why));
    }
}

/* A DV file holding bitmap {rows} at its offset (built by the writer). */
static mcdc_storage *dv_store(mcdc_storage_mem **m, mcdc_delta_file *f, const uint64_t *rows,
                              int n, mcdc_dv_writer **w) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage *st = NULL;
    if (mcdc_storage_mem_create(m, "dv", &e) || mcdc_storage_mem_open(&st, *m, "t", &e))
        return NULL;
    mcdc_dv_bitmap *b = NULL, *other = NULL;
    mcdc_dv_writer_create(w, &e);
    mcdc_dv_bitmap_create(&b, &e);
    mcdc_dv_bitmap_create(&other, &e);
    mcdc_dv_bitmap_add(other, 1, &e);
    for (int i = 0; i < n; i++) mcdc_dv_bitmap_add(b, rows[i], &e);
    mcdc_delta_dv first;
    mcdc_dv_writer_add(*w, other, &first, &e); /* so that ours is not at offset 1 */
    mcdc_dv_writer_add(*w, b, &f->dv, &e);
    mcdc_dv_writer_finish(*w, st, NULL, &e);
    mcdc_dv_bitmap_free(b);
    mcdc_dv_bitmap_free(other);
    f->path = "part-1.parquet";
    return st;
}

TEST(dv_file_round_trip_across_buckets) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage_mem *m = NULL;
    mcdc_dv_writer *w = NULL;
    mcdc_delta_file f = {0};
    const uint64_t rows[] = {0, 70000, 70001, (1ULL << 32) + 7};
    mcdc_storage *st = dv_store(&m, &f, rows, 4, &w);
    CHECK(st != NULL && f.dv.storage_type == 'u' && f.dv.offset > 1);
    CHECK_EQ_INT(f.dv.cardinality, 4);
    CHECK_EQ_INT(f.dv.max_row_index, (1LL << 32) + 7);
    mcdc_dv_bitmap *b = NULL;
    CHECK_EQ_INT(mcdc_dv_load(&b, st, "mem://dv/t", &f, -1, &e), MCDC_OK);
    CHECK(b && mcdc_dv_bitmap_contains(b, (1ULL << 32) + 7) && mcdc_dv_bitmap_contains(b, 70001));
    CHECK(b && !mcdc_dv_bitmap_contains(b, 1) && mcdc_dv_bitmap_cardinality(b) == 4);
    mcdc_dv_bitmap_free(b);
    /* the file's rows bound the DV */
    CHECK_EQ_INT(mcdc_dv_load(&b, st, "mem://dv/t", &f, 1000, &e), MCDC_E_CORRUPT);
    CHECK(strstr(e.message, "beyond the 1000 rows") && strstr(e.message, "part-1.parquet"));
    f.dv.cardinality = 5;
    CHECK_EQ_INT(mcdc_dv_load(&b, st, "mem://dv/t", &f, -1, &e), MCDC_E_CORRUPT);
    CHECK(strstr(e.message, "cardinality 5") != NULL);
    mcdc_dv_writer_free(w);
    mcdc_storage_free(st);
    mcdc_storage_mem_release(m);
}

TEST(dv_damaged_files_are_corrupt_naming_the_file) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage_mem *m = NULL;
    mcdc_dv_writer *w = NULL;
    mcdc_delta_file f = {0};
    const uint64_t rows[] = {2, 9};
    mcdc_storage *st = dv_store(&m, &f, rows, 2, &w);
    const char *key = NULL;
    mcdc_dv_writer_finish(w, st, &key, &e); /* put-if-absent again: just the key */
    mcdc_buf good = {0};
    CHECK_EQ_INT(mcdc_storage_get(st, key, 1 << 20, &good, &e), MCDC_OK);
    const struct {
        size_t at;     /* byte flipped (relative to the DV's offset; SIZE_MAX: byte 0) */
        size_t cut;    /* or the file cut to this length (0: none) */
        const char *why;
    } cases[] = {
        {SIZE_MAX, 0, "format version 1"},
        {3, 0, "size field differs"},
        {5, 0, "CRC-32"},                        /* a magic byte: the CRC catches it first */
        {4 + (size_t)f.dv.size_bytes + 1, 0, "CRC-32"},
        {0, (size_t)f.dv.offset + 6, "file ends before"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mcdc_buf bad = {0};
        mcdc_buf_append(&bad, good.data, cases[i].cut ? cases[i].cut : good.len, &e);
        if (!cases[i].cut) {
            size_t at = cases[i].at == SIZE_MAX ? 0 : (size_t)f.dv.offset + cases[i].at;
            bad.data[at] ^= 0x40;
        }
        mcdc_storage_put(st, key, bad.data, bad.len, &e);
        mcdc_dv_bitmap *b = NULL;
        CHECK_EQ_INT(mcdc_dv_load(&b, st, "mem://dv/t", &f, -1, &e), MCDC_E_CORRUPT);
        CHECK(b == NULL);
        CHECK(strstr(e.message, key) && strstr(e.message, "part-1.parquet") &&
              strstr(e.message, cases[i].why));
        mcdc_buf_free(&bad);
    }
    /* a bitmap with a wrong magic (CRC recomputed by going through parse) */
    uint8_t junk[16] = {1, 2, 3, 4};
    mcdc_dv_bitmap *b = NULL;
    CHECK_EQ_INT(mcdc_dv_bitmap_parse(&b, junk, sizeof junk, "x.bin", &e), MCDC_E_CORRUPT);
    CHECK(strstr(e.message, "wrong magic") && strstr(e.message, "x.bin"));
    mcdc_buf ser = {0};
    mcdc_dv_bitmap *one = NULL;
    mcdc_dv_bitmap_create(&one, &e);
    mcdc_dv_bitmap_add(one, 5, &e);
    mcdc_dv_bitmap_serialize(&ser, one, &e);
    mcdc_dv_bitmap_free(one);
    CHECK_EQ_INT(mcdc_dv_bitmap_parse(&b, ser.data, ser.len - 1, "x.bin", &e), MCDC_E_CORRUPT);
    CHECK(strstr(e.message, "portable roaring") != NULL);
    mcdc_buf_append_byte(&ser, 0, &e);
    CHECK_EQ_INT(mcdc_dv_bitmap_parse(&b, ser.data, ser.len, "x.bin", &e), MCDC_E_CORRUPT);
    CHECK(strstr(e.message, "bytes after the last bucket") != NULL);
    mcdc_buf_free(&ser);
    /* a missing DV file */
    mcdc_storage_delete(st, key, &e);
    CHECK_EQ_INT(mcdc_dv_load(&b, st, "mem://dv/t", &f, -1, &e), MCDC_E_NOTFOUND);
    CHECK(strstr(e.message, "part-1.parquet") != NULL);
    mcdc_buf_free(&good);
    mcdc_dv_writer_free(w);
    mcdc_storage_free(st);
    mcdc_storage_mem_release(m);
}

/* ---- through the log, the checkpoint and the table reader ------------------- */

typedef struct {
    int64_t rows, sum;
} dv_acc;

static int dv_collect(void *ctx, mcdc_batch *b, mcdc_error *err) {
    (void)err;
    dv_acc *a = ctx;
    for (int64_t r = 0; r < b->rows; r++) a->sum += mcdc_row_get(b, r, 0).i;
    a->rows += b->rows;
    mcdc_batch_free(b);
    return MCDC_OK;
}

static void dv_scan(const char *path, dv_acc *a) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_table *t = NULL;
    int64_t v;
    mcdc_table_scan sc = MCDC_TABLE_SCAN_INIT;
    memset(a, 0, sizeof *a);
    CHECK_EQ_INT(mcdc_table_open(&t, path, NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_table_scan_run(t, &sc, dv_collect, a, &v, NULL, &e), MCDC_OK);
    mcdc_table_close(t);
}

TEST(dv_log_checkpoint_and_reader_skip_deleted_rows) {
    char tmpl[] = "/tmp/mcdc_dv_XXXXXX";
    char *d = mkdtemp(tmpl);
    char path[600], cmd[1400];
    snprintf(path, sizeof path, "%s/t", d);
    mcdc_error e = MCDC_ERROR_INIT;
    /* 1000 rows k = 0..999 in one file */
    mcdc_table *lt = NULL;
    CHECK_EQ_INT(mcdc_table_open(&lt, path, NULL, &e), MCDC_OK);
    mcdc_schema *s;
    mcdc_schema_create(&s, 1, &e);
    mcdc_schema_set(s, 0, "k", MCDC_TYPE_INT64, 0, 0, 0, true, &e);
    mcdc_batch *b;
    mcdc_batch_create(&b, s, 1000, &e);
    for (int i = 0; i < 1000; i++) {
        mcdc_cell c = mcdc_cell_int(i);
        mcdc_row_append(b, &c, &e);
    }
    mcdc_batch_seal(b, &e);
    mcdc_appender *a;
    bool skipped;
    int64_t v = -1;
    CHECK_EQ_INT(mcdc_appender_open(&a, lt, s, NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_appender_write(a, b, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_appender_commit(a, NULL, 0, NULL, &skipped, &v, &e), MCDC_OK);
    mcdc_appender_free(a);
    mcdc_batch_free(b);
    mcdc_schema_unref(s);
    mcdc_table_close(lt);
    /* delete rows 3, 500 and 999 with a DV: remove(path) + add(path, dv) */
    mcdc_delta_table *t = NULL;
    CHECK_EQ_INT(mcdc_delta_table_open(&t, path, NULL, &e), MCDC_OK);
    mcdc_delta_snapshot *snap = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&snap, t, -1, &e), MCDC_OK);
    mcdc_delta_file old = *mcdc_delta_snapshot_file(snap, 0), now = old;
    mcdc_dv_writer *w = NULL;
    mcdc_dv_bitmap *del = NULL;
    mcdc_dv_writer_create(&w, &e);
    mcdc_dv_bitmap_create(&del, &e);
    mcdc_dv_bitmap_add(del, 3, &e);
    mcdc_dv_bitmap_add(del, 500, &e);
    mcdc_dv_bitmap_add(del, 999, &e);
    CHECK_EQ_INT(mcdc_dv_writer_add(w, del, &now.dv, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_dv_writer_finish(w, mcdc_delta_table_storage(t), NULL, &e), MCDC_OK);
    mcdc_delta_append_opts o = MCDC_DELTA_APPEND_OPTS_INIT;
    o.adds = &now;
    o.n_adds = 1;
    o.removes = &old;
    o.n_removes = 1;
    o.read_version = v;
    o.operation = "DELETE";
    mcdc_delta_commit_result r;
    CHECK_EQ_INT(mcdc_delta_append(&r, t, &o, &e), MCDC_OK);
    mcdc_dv_bitmap_free(del);
    mcdc_dv_writer_free(w);
    mcdc_delta_snapshot_free(snap);
    /* the log carries the whole descriptor, the row count is net */
    mcdc_delta_snapshot *s2 = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s2, t, -1, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_delta_snapshot_file_count(s2), 1);
    const mcdc_delta_file *lf = mcdc_delta_snapshot_file(s2, 0);
    CHECK(lf->dv.storage_type == 'u' && lf->dv.cardinality == 3 && lf->dv.max_row_index == 999);
    CHECK(lf->dv_unique_id && lf->dv_unique_id[0] == 'u' && strchr(lf->dv_unique_id, '@'));
    CHECK_EQ_INT(mcdc_delta_snapshot_total_records(s2), 997);
    mcdc_delta_snapshot_free(s2);
    dv_acc acc;
    dv_scan(path, &acc);
    CHECK_EQ_INT(acc.rows, 997);
    CHECK_EQ_INT(acc.sum, 999 * 500 - 3 - 500 - 999);
    /* a checkpoint carries it too: read with the commits before it gone */
    CHECK_EQ_INT(mcdc_delta_checkpoint(t, r.version, &e), MCDC_OK);
    mcdc_delta_table_free(t);
    CHECK_EQ_INT(r.version, 2);
    snprintf(cmd, sizeof cmd, "rm '%s'/_delta_log/0000000000000000000[01].json", path);
    CHECK(system(cmd) == 0);
    CHECK_EQ_INT(mcdc_delta_table_open(&t, path, NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s2, t, -1, &e), MCDC_OK);
    lf = s2 ? mcdc_delta_snapshot_file(s2, 0) : NULL;
    CHECK(lf && lf->dv.storage_type == 'u' && lf->dv.cardinality == 3 &&
          lf->dv.max_row_index == 999 && lf->dv.size_bytes > 0);
    mcdc_delta_snapshot_free(s2);
    mcdc_delta_table_free(t);
    dv_scan(path, &acc);
    CHECK_EQ_INT(acc.rows, 997);
    CHECK_EQ_INT(acc.sum, 999 * 500 - 3 - 500 - 999);
    /* the reader tells the file positions of the rows it gives */
    mcdc_table *lt2 = NULL;
    CHECK_EQ_INT(mcdc_table_open(&lt2, path, NULL, &e), MCDC_OK);
    mcdc_table_view *view = NULL;
    CHECK_EQ_INT(mcdc_table_view_open(&view, lt2, -1, &e), MCDC_OK);
    mcdc_table_file tf = mcdc_table_view_file(view, 0);
    CHECK_EQ_INT(tf.dv_rows, 3);
    char *fpath = strdup(tf.path);
    mcdc_table_reader *rd = NULL;
    CHECK_EQ_INT(mcdc_table_reader_open(&rd, view, fpath, NULL, 0, NULL, &e), MCDC_OK);
    mcdc_batch *rb = NULL;
    CHECK_EQ_INT(mcdc_table_reader_next(&rb, rd, &e), MCDC_OK);
    int64_t first = -1;
    const int32_t *keep = NULL;
    mcdc_table_reader_positions(rd, &first, &keep);
    CHECK(rb && first == 0 && keep && keep[2] == 2 && keep[3] == 4 && mcdc_row_get(rb, 3, 0).i == 4);
    CHECK(mcdc_table_reader_dv(rd) && mcdc_dv_bitmap_cardinality(mcdc_table_reader_dv(rd)) == 3);
    mcdc_batch_free(rb);
    mcdc_table_reader_free(rd);
    mcdc_table_view_free(view);
    /* a commit bringing the file back with a grown DV: remove(old) + add(new) */
    CHECK_EQ_INT(mcdc_delta_table_open(&t, path, NULL, &e), MCDC_OK);
    mcdc_dv_bitmap_create(&del, &e);
    const uint64_t gone[] = {3, 500, 999, 7};
    for (int i = 0; i < 4; i++) mcdc_dv_bitmap_add(del, gone[i], &e);
    mcdc_dv_writer_create(&w, &e);
    mcdc_delta_dv grown;
    CHECK_EQ_INT(mcdc_dv_writer_add(w, del, &grown, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_dv_writer_finish(w, mcdc_delta_table_storage(t), NULL, &e), MCDC_OK);
    mcdc_delta_table_free(t);
    mcdc_schema *one;
    mcdc_schema_create(&one, 1, &e);
    mcdc_schema_set(one, 0, "k", MCDC_TYPE_INT64, 0, 0, 0, true, &e);
    CHECK_EQ_INT(mcdc_appender_open(&a, lt2, one, NULL, &e), MCDC_OK);
    const char *rm[] = {fpath};
    mcdc_table_commit c = {.operation = "DELETE", .remove_paths = rm, .n_removes = 1,
                           .read_version = r.version, .readd_dvs = &grown};
    CHECK_EQ_INT(mcdc_appender_commit_with(a, &c, &skipped, &v, &e), MCDC_OK);
    mcdc_appender_free(a);
    mcdc_schema_unref(one);
    mcdc_dv_writer_free(w);
    mcdc_dv_bitmap_free(del);
    mcdc_table_close(lt2);
    dv_scan(path, &acc);
    CHECK_EQ_INT(acc.rows, 996);
    CHECK_EQ_INT(acc.sum, 999 * 500 - 3 - 500 - 999 - 7);
    CHECK_EQ_INT(mcdc_delta_table_open(&t, path, NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s2, t, -1, &e), MCDC_OK);
    lf = s2 ? mcdc_delta_snapshot_file(s2, 0) : NULL;
    CHECK(s2 && mcdc_delta_snapshot_file_count(s2) == 1 && lf->dv.cardinality == 4);
    CHECK(lf && lf->stats_json && strstr(lf->stats_json, "\"tightBounds\":false") &&
          strstr(lf->stats_json, "\"numRecords\":1000"));
    mcdc_delta_snapshot_free(s2);
    mcdc_delta_table_free(t);
    free(fpath);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    CHECK(system(cmd) == 0);
}
