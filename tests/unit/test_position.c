/*
 * test_position.c - typed positions (mcdc_position.h) read from the JSON
 * earlier builds wrote (a stream's offsets file and checkpoint metadata, a
 * bronze commit's "planned", a backfill wave, an apply pass), written back
 * as the same JSON, and compared on their fields.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_frame.h"
#include "mcdc_position.h"
#include "mcdc_test.h"

/* As mcdc_checkpoint.c wrote offsets/3 (keys sorted, compact). */
static const char OFFSETS_3[] =
    "{\"batch_id\":3,\"end\":{\"capture_instance\":\"dbo_t_v2\",\"commit_ts\":"
    "\"2026-12-01T14:00:00.123\",\"lsn\":\"0x0000002A000001F00003\"},\"start\":{\"commit_ts\":"
    "\"2026-12-01T13:59:59.000\",\"lsn\":\"0x0000002A000001E00001\"}}";
/* The stream's bronze commit of that batch: its userMetadata as the frame
 * wrote it (the job's keys, then the binding, in that order). */
static const char BRONZE_META_3[] =
    "{\"rows\":5,\"min_lsn\":\"0x0000002A000001E00002\",\"max_lsn\":\"0x0000002A000001F00003\","
    "\"batch_id\":3,\"app_id\":\"orders\",\"planned\":{\"start\":{\"lsn\":"
    "\"0x0000002A000001E00001\",\"commit_ts\":\"2026-12-01T13:59:59.000\"},\"end\":{\"lsn\":"
    "\"0x0000002A000001F00003\",\"commit_ts\":\"2026-12-01T14:00:00.123\",\"capture_instance\":"
    "\"dbo_t_v2\"}},\"checkpoint_id\":\"0f6c1e0e-5b8e-4c4e-9d3e-2a1b3c4d5e6f\"}";

static json_t *load(const char *text) {
    json_error_t je;
    return json_loads(text, 0, &je);
}

/* p written back is the JSON it was read from. */
static void check_round_trip(const mcdc_pos *p, const json_t *from) {
    json_t *back = mcdc_pos_json(p);
    CHECK(back != NULL && json_equal(back, (json_t *)from));
    if (back && !json_equal(back, (json_t *)from)) {
        char *a = json_dumps(back, JSON_SORT_KEYS), *b = json_dumps(from, JSON_SORT_KEYS);
        printf("  wrote %s\n  read  %s\n", a, b);
        free(a);
        free(b);
    }
    json_decref(back);
}

TEST(position_reads_a_stream_checkpoint_and_its_commit_as_earlier_builds_wrote_them) {
    json_t *off = load(OFFSETS_3);
    CHECK(off != NULL);
    mcdc_pos start = {0}, end = {0};
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_pos_parse(&start, MCDC_POS_OFFSET, json_object_get(off, "start"), &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_pos_parse(&end, MCDC_POS_OFFSET, json_object_get(off, "end"), &e), MCDC_OK);
    char lsn[MCDC_LSN_TEXT_LEN + 1];
    mcdc_lsn_format(&end.offset.lsn, lsn);
    CHECK_EQ_STR(lsn, "0x0000002A000001F00003");
    CHECK(end.offset.has_ts);
    CHECK_EQ_STR(end.offset.ci, "dbo_t_v2");
    CHECK_EQ_STR(start.offset.ci, "");
    check_round_trip(&start, json_object_get(off, "start"));
    check_round_trip(&end, json_object_get(off, "end"));
    /* the commit's "planned" is the same unit: equal on every field */
    mcdc_pos cs = {0}, ce = {0};
    CHECK_EQ_INT(mcdc_frame_planned_of(BRONZE_META_3, MCDC_POS_OFFSET, &cs, &ce, &e), MCDC_OK);
    CHECK(mcdc_pos_eq(&cs, &start));
    CHECK(mcdc_pos_eq(&ce, &end));
    /* another range is not */
    ce.offset.commit_us += 1000;
    CHECK(!mcdc_pos_eq(&ce, &end));
    ce.offset.commit_us -= 1000;
    ce.offset.ci[0] = 0;
    CHECK(!mcdc_pos_eq(&ce, &end));
    CHECK(!mcdc_pos_eq(&cs, &end));
    /* a commit that names no plan, and one that names another kind's */
    CHECK_EQ_INT(mcdc_frame_planned_of("{\"rows\":1}", MCDC_POS_OFFSET, &cs, &ce, NULL),
                 MCDC_E_NOTFOUND);
    CHECK_EQ_INT(mcdc_frame_planned_of("{\"planned\":{\"start\":{\"chunk\":0},\"end\":{}}}",
                                       MCDC_POS_OFFSET, &cs, &ce, NULL),
                 MCDC_E_CORRUPT);
    CHECK(cs.kind == MCDC_POS_NONE && ce.kind == MCDC_POS_NONE);
    /* an offset without commit time ("": none) */
    json_t *bare = load("{\"lsn\":\"0x00000000000000000010\",\"commit_ts\":\"\"}");
    mcdc_pos b = {0};
    CHECK_EQ_INT(mcdc_pos_parse(&b, MCDC_POS_OFFSET, bare, &e), MCDC_OK);
    CHECK(!b.offset.has_ts);
    check_round_trip(&b, bare);
    json_decref(bare);
    mcdc_pos_free(&start);
    mcdc_pos_free(&end);
    json_decref(off);
}

TEST(position_reads_a_backfill_wave_and_an_apply_pass_as_earlier_builds_wrote_them) {
    mcdc_error e = MCDC_ERROR_INIT;
    /* a wave's plan: bounds of any JSON (a composite key, an open end) */
    json_t *ws = load("{\"chunk\":2}");
    json_t *we = load("{\"chunk\":4,\"chunks\":[[2,[10,\"EU\"],[20,\"EU\"]],[3,[20,\"EU\"],null]]}");
    mcdc_pos s = {0}, w = {0};
    CHECK_EQ_INT(mcdc_pos_parse(&s, MCDC_POS_WAVE, ws, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_pos_parse(&w, MCDC_POS_WAVE, we, &e), MCDC_OK);
    CHECK(!s.wave.has_chunks && s.wave.chunk == 2);
    CHECK(w.wave.has_chunks && w.wave.n == 2 && w.wave.chunk == 4);
    CHECK_EQ_STR(w.wave.chunks[0].lo, "[10,\"EU\"]");
    CHECK(w.wave.chunks[1].hi == NULL);
    check_round_trip(&s, ws);
    check_round_trip(&w, we);
    mcdc_pos copy = {0};
    CHECK_EQ_INT(mcdc_pos_copy(&copy, &w, &e), MCDC_OK);
    CHECK(mcdc_pos_eq(&copy, &w));
    mcdc_free(copy.wave.chunks[1].lo);
    copy.wave.chunks[1].lo = mcdc_strdup("[21,\"EU\"]");
    CHECK(!mcdc_pos_eq(&copy, &w));
    mcdc_pos_free(&copy);
    mcdc_pos_free(&s);
    mcdc_pos_free(&w);
    json_decref(ws);
    json_decref(we);

    /* an apply pass: cells (none as null), then the end's versions and verdict */
    json_t *as = load("{\"applied_lsn\":\"0x0000002A000001E00001\",\"snapshot_lsn\":null,"
                      "\"open_snapshot_lsn\":null,\"snapshot_wave\":null}");
    json_t *ae = load("{\"applied_lsn\":\"0x0000002A000001F00003\",\"snapshot_lsn\":"
                      "\"0x00000020000000100001\",\"open_snapshot_lsn\":null,\"snapshot_wave\":2,"
                      "\"bronze_version\":7,\"facts_version\":3,\"verdict_lsn\":"
                      "\"0x0000002A000001F00003\",\"verdict_us\":1796133600123000}");
    mcdc_pos a = {0}, b = {0};
    CHECK_EQ_INT(mcdc_pos_parse(&a, MCDC_POS_APPLY, as, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_pos_parse(&b, MCDC_POS_APPLY, ae, &e), MCDC_OK);
    CHECK(a.apply.cells.applied.set && !a.apply.cells.snapshot.set && !a.apply.has_versions);
    CHECK(b.apply.has_versions && b.apply.facts_version == 3 && b.apply.cells.wave == 2);
    CHECK(b.apply.has_verdict && b.apply.verdict_us == 1796133600123000);
    check_round_trip(&a, as);
    check_round_trip(&b, ae);
    CHECK(!mcdc_pos_eq(&a, &b));
    json_decref(as);
    json_decref(ae);

    /* a one-unit job's stamp: none at its start */
    json_t *none = load("{}"), *at = load("{\"lsn\":\"0x0000002A000001F00003\",\"commit_ts\":\"\"}");
    mcdc_pos p = {0}, q = {0};
    CHECK_EQ_INT(mcdc_pos_parse(&p, MCDC_POS_STAMP, none, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_pos_parse(&q, MCDC_POS_STAMP, at, &e), MCDC_OK);
    CHECK(!p.stamp.has_lsn && q.stamp.has_lsn && !q.stamp.has_ts);
    check_round_trip(&p, none);
    check_round_trip(&q, at);
    json_decref(none);
    json_decref(at);

    /* not positions */
    json_t *bad = load("{\"chunks\":[]}");
    CHECK_EQ_INT(mcdc_pos_parse(&p, MCDC_POS_WAVE, bad, NULL), MCDC_E_CORRUPT);
    CHECK_EQ_INT(mcdc_pos_parse(&p, MCDC_POS_OFFSET, bad, NULL), MCDC_E_CORRUPT);
    json_decref(bad);
    CHECK_EQ_INT(mcdc_pos_parse(&p, MCDC_POS_APPLY, NULL, NULL), MCDC_E_CORRUPT);
}
