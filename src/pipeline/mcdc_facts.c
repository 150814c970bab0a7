/* mcdc_facts.c - facts rows of a unit (see mcdc_facts.h). */
#include "mcdc_facts.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_tables.h"

/* The order of two LSN texts (fixed width, so string order is LSN order):
 * memcmp's, from three big-endian words (bytes 0-7, 8-15, 14-21) instead of
 * a call per row. */
_Static_assert(MCDC_LSN_TEXT_LEN > 16 && MCDC_LSN_TEXT_LEN <= 24, "three words");
static inline uint64_t lsn_word(const char *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    return __builtin_bswap64(w);
}
static inline int lsn_text_cmp(const char *a, const char *b) {
    static const int at[3] = {0, 8, MCDC_LSN_TEXT_LEN - 8};
    for (int i = 0; i < 3; i++) {
        uint64_t x = lsn_word(a + at[i]), y = lsn_word(b + at[i]);
        if (x != y) return x < y ? -1 : 1;
    }
    return 0;
}

void mcdc_unit_stats_add(mcdc_unit_stats *s, const mcdc_batch *b) {
    int32_t lsn_col = mcdc_schema_find(b->schema, "_start_lsn");
    int32_t op_col = mcdc_schema_find(b->schema, "_operation");
    int32_t ts_col = mcdc_schema_find(b->schema, "_commit_ts");
    MCDC_ASSERT(lsn_col >= 0 && op_col >= 0 && ts_col >= 0);
    const mcdc_column *lc = &b->columns[lsn_col], *oc = &b->columns[op_col],
                      *tc = &b->columns[ts_col];
    MCDC_ASSERT(oc->field->type == MCDC_TYPE_INT32 && tc->field->type == MCDC_TYPE_TIMESTAMP_NTZ);
    if (b->rows == 0) return;
    const int32_t *ops = (const int32_t *)(const void *)oc->values;
    const int64_t *ts = (const int64_t *)(const void *)tc->values;
    int64_t deletes = 0, inserts = 0, updates = 0, lo = ts[0], hi = ts[0];
    for (int64_t r = 0; r < b->rows; r++) {
        deletes += ops[r] == 1;
        inserts += ops[r] == 2;
        updates += ops[r] == 4;
        lo = ts[r] < lo ? ts[r] : lo;
        hi = ts[r] > hi ? ts[r] : hi;
    }
    s->deletes += deletes;
    s->inserts += inserts;
    s->updates += updates;
    if (s->rows == 0 || lo < s->min_ts) s->min_ts = lo;
    if (s->rows == 0 || hi > s->max_ts) s->max_ts = hi;
    /* the batch's least and greatest LSN, then the unit's */
    const char *min_v = NULL, *max_v = NULL;
    for (int64_t r = 0; r < b->rows; r++) {
        if (lc->offsets[r + 1] - lc->offsets[r] != MCDC_LSN_TEXT_LEN) continue;
        const char *v = (const char *)lc->data + lc->offsets[r];
        if (min_v == NULL) min_v = max_v = v;
        else if (lsn_text_cmp(v, min_v) < 0) min_v = v;
        else if (lsn_text_cmp(v, max_v) > 0) max_v = v;
    }
    if (min_v && (s->min_lsn[0] == 0 || lsn_text_cmp(min_v, s->min_lsn) < 0))
        memcpy(s->min_lsn, min_v, MCDC_LSN_TEXT_LEN);
    if (max_v && (s->max_lsn[0] == 0 || lsn_text_cmp(max_v, s->max_lsn) > 0))
        memcpy(s->max_lsn, max_v, MCDC_LSN_TEXT_LEN);
    s->rows += b->rows;
}

static double median(double *v, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void mcdc_unit_metrics_fold(mcdc_unit_metrics *f, const mcdc_reader_metrics *ms, int n) {
    memset(f, 0, sizeof *f);
    double rtts[MCDC_PARTITIONS_MAX];
    int nrtt = 0;
    f->network_known = n > 0;
    for (int i = 0; i < n; i++) {
        const mcdc_reader_metrics *m = &ms[i];
        f->any = true;
        if (m->rtt_known && nrtt < MCDC_PARTITIONS_MAX) rtts[nrtt++] = m->rtt_ms;
        f->read_seconds += m->seconds;
        f->read_mb += (double)m->bytes / 1e6;
        if (!m->network_wait_known)
            f->network_known = false;
        else
            f->network_wait_ms += m->network_wait_ms;
        if (m->measured_position) {
            f->last = *m;
            f->has_last = true;
        }
    }
    if (nrtt) {
        f->rtt_ms = median(rtts, nrtt);
        f->has_rtt = true;
    }
}

/* x rounded to `digits` decimals as the reference rounds its metrics
 * (Python's round: the correctly rounded decimal, ties to even, which is
 * what printf's conversion of the exact binary value gives). */
static double round_to(double x, int digits) {
    char buf[64];
    snprintf(buf, sizeof buf, "%.*f", digits, x);
    return strtod(buf, NULL);
}

static void cells_null(mcdc_cell *c) {
    for (int i = 0; i < MCDC_F_COUNT; i++) c[i] = mcdc_cell_null();
}

int mcdc_facts_append_batch(mcdc_batch *rows, const mcdc_facts_batch *fb, mcdc_error *err) {
    const mcdc_unit_stats *st = fb->stats;
    const mcdc_unit_metrics *fm = fb->metrics;
    mcdc_cell c[MCDC_F_COUNT];
    cells_null(c);
    c[MCDC_F_APP_ID] = mcdc_cell_text(fb->app_id);
    c[MCDC_F_BATCH_ID] = mcdc_cell_int(fb->batch_id);
    c[MCDC_F_ROWS] = mcdc_cell_int(st->rows);
    if (st->rows) {
        c[MCDC_F_MIN_LSN] = mcdc_cell_text(st->min_lsn);
        c[MCDC_F_MAX_LSN] = mcdc_cell_text(st->max_lsn);
        c[MCDC_F_MIN_COMMIT_TS] = mcdc_cell_int(st->min_ts);
        c[MCDC_F_MAX_COMMIT_TS] = mcdc_cell_int(st->max_ts);
    }
    c[MCDC_F_DELETES] = mcdc_cell_int(st->deletes);
    c[MCDC_F_INSERTS] = mcdc_cell_int(st->inserts);
    c[MCDC_F_UPDATES] = mcdc_cell_int(st->updates);
    c[MCDC_F_STARTED_AT] = mcdc_cell_int(fb->started_us);
    c[MCDC_F_DURATION_MS] = mcdc_cell_int(fb->duration_ms);
    if (fm->any) {
        /* The reference's precision: rtt 0.1 ms, seconds 1 ms, MB 1 byte. */
        if (fm->has_rtt) c[MCDC_F_SOURCE_RTT_MS] = mcdc_cell_double(round_to(fm->rtt_ms, 1));
        c[MCDC_F_READ_SECONDS] = mcdc_cell_double(round_to(fm->read_seconds, 3));
        c[MCDC_F_READ_MB] = mcdc_cell_double(round_to(fm->read_mb, 6));
        if (fm->network_known) c[MCDC_F_NETWORK_WAIT_MS] = mcdc_cell_int(fm->network_wait_ms);
        c[MCDC_F_END_LSN] = mcdc_cell_text(fb->end_lsn);
        if (fb->has_end_ts) c[MCDC_F_END_COMMIT_TS] = mcdc_cell_int(fb->end_commit_us);
    }
    if (fm->has_last) {
        const mcdc_reader_metrics *m = &fm->last;
        if (m->retention_watermark_known) {
            c[MCDC_F_RETENTION_WATERMARK_TS] = mcdc_cell_int(m->retention_watermark_ts_us);
            int64_t ref = fb->has_end_ts ? fb->end_commit_us : st->max_ts;
            c[MCDC_F_RETENTION_HEADROOM_HOURS] =
                mcdc_cell_double(round_to((double)(ref - m->retention_watermark_ts_us) / 3600e6, 2));
        }
        if (m->source_max_commit_ts_known) {
            c[MCDC_F_SOURCE_MAX_COMMIT_TS] = mcdc_cell_int(m->source_max_commit_ts_us);
            c[MCDC_F_CAPTURE_LAG_SECONDS] = mcdc_cell_double(round_to(m->capture_lag_seconds, 3));
            if (fb->has_end_ts)
                c[MCDC_F_INGESTION_LAG_SECONDS] = mcdc_cell_double(
                    round_to((double)(m->source_max_commit_ts_us - fb->end_commit_us) / 1e6, 3));
        }
    }
    c[MCDC_F_DETAIL] = mcdc_cell_text(fb->detail);
    c[MCDC_F_TARGET] = mcdc_cell_text(fb->target);
    c[MCDC_F_WRITTEN_AT] = mcdc_cell_int(fb->written_us);
    return mcdc_row_append(rows, c, err);
}

int mcdc_facts_append_skip(mcdc_batch *rows, const mcdc_facts_skip *sk, mcdc_error *err) {
    char from[MCDC_LSN_TEXT_LEN + 1], to[MCDC_LSN_TEXT_LEN + 1];
    mcdc_lsn_format(&sk->from, from);
    mcdc_lsn_format(&sk->to, to);
    json_t *d = json_pack("{s:s, s:s, s:b}", "from", from, "to", to, "certain", sk->certain);
    if (d && sk->reason) json_object_set_new(d, "reason", json_string(sk->reason));
    char *detail = d ? json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(d);
    if (detail == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    mcdc_cell c[MCDC_F_COUNT];
    cells_null(c);
    c[MCDC_F_APP_ID] = mcdc_cell_text(sk->app_id);
    c[MCDC_F_BATCH_ID] = mcdc_cell_int(sk->batch_id);
    c[MCDC_F_ROWS] = mcdc_cell_int(0);
    c[MCDC_F_MIN_LSN] = mcdc_cell_text(from);
    c[MCDC_F_MAX_LSN] = mcdc_cell_text(to);
    c[MCDC_F_EVENT] = mcdc_cell_text("data_skipped");
    if (sk->has_lost_from) c[MCDC_F_LOST_FROM_TS] = mcdc_cell_int(sk->lost_from_us);
    if (sk->certain && sk->has_lost_to) c[MCDC_F_LOST_TO_TS] = mcdc_cell_int(sk->lost_to_us);
    c[MCDC_F_END_LSN] = mcdc_cell_text(to);
    c[MCDC_F_DETAIL] = mcdc_cell_text(detail);
    c[MCDC_F_TARGET] = mcdc_cell_text(sk->target);
    c[MCDC_F_WRITTEN_AT] = mcdc_cell_int(sk->written_us);
    int rc = mcdc_row_append(rows, c, err);
    free(detail);
    return rc;
}

int mcdc_facts_append_event(mcdc_batch *rows, const mcdc_facts_event *ev, mcdc_error *err) {
    mcdc_cell c[MCDC_F_COUNT];
    cells_null(c);
    c[MCDC_F_APP_ID] = mcdc_cell_text(ev->app_id);
    if (ev->in_batch) c[MCDC_F_BATCH_ID] = mcdc_cell_int(ev->batch_id);
    if (ev->rows >= 0) c[MCDC_F_ROWS] = mcdc_cell_int(ev->rows);
    c[MCDC_F_MIN_LSN] = mcdc_cell_text(ev->lsn);
    c[MCDC_F_MAX_LSN] = mcdc_cell_text(ev->lsn);
    if (ev->has_commit_ts) {
        c[MCDC_F_MIN_COMMIT_TS] = mcdc_cell_int(ev->commit_us);
        c[MCDC_F_MAX_COMMIT_TS] = mcdc_cell_int(ev->commit_us);
        c[MCDC_F_END_COMMIT_TS] = mcdc_cell_int(ev->commit_us);
    }
    c[MCDC_F_DELETES] = mcdc_cell_int(0);
    c[MCDC_F_INSERTS] = mcdc_cell_int(0);
    c[MCDC_F_UPDATES] = mcdc_cell_int(0);
    if (ev->has_timing) {
        c[MCDC_F_STARTED_AT] = mcdc_cell_int(ev->started_us);
        c[MCDC_F_DURATION_MS] = mcdc_cell_int(ev->duration_ms);
    }
    /* A loss ends where cleanup had got to: that is the watermark. */
    if (ev->has_lost_to) {
        c[MCDC_F_RETENTION_WATERMARK_TS] = mcdc_cell_int(ev->lost_to_us);
        if (ev->has_commit_ts)
            c[MCDC_F_RETENTION_HEADROOM_HOURS] =
                mcdc_cell_double(round_to((double)(ev->commit_us - ev->lost_to_us) / 3600e6, 2));
    }
    c[MCDC_F_EVENT] = mcdc_cell_text(ev->event);
    if (ev->has_lost_from) c[MCDC_F_LOST_FROM_TS] = mcdc_cell_int(ev->lost_from_us);
    if (ev->has_lost_to) c[MCDC_F_LOST_TO_TS] = mcdc_cell_int(ev->lost_to_us);
    c[MCDC_F_END_LSN] = mcdc_cell_text(ev->lsn);
    c[MCDC_F_DETAIL] = mcdc_cell_text(ev->detail);
    c[MCDC_F_TARGET] = mcdc_cell_text(ev->target);
    c[MCDC_F_WRITTEN_AT] = mcdc_cell_int(mcdc_now_utc_us());
    return mcdc_row_append(rows, c, err);
}

int mcdc_facts_append_chunk(mcdc_batch *rows, const mcdc_facts_chunk *k, mcdc_error *err) {
    mcdc_cell c[MCDC_F_COUNT];
    cells_null(c);
    c[MCDC_F_APP_ID] = mcdc_cell_text(k->app_id);
    c[MCDC_F_ROWS] = mcdc_cell_int(k->rows);
    c[MCDC_F_MIN_LSN] = mcdc_cell_text(k->lsn);
    c[MCDC_F_MAX_LSN] = mcdc_cell_text(k->high_lsn);
    if (k->has_lsn_ts) c[MCDC_F_MIN_COMMIT_TS] = mcdc_cell_int(k->lsn_ts_us);
    if (k->has_high_ts) c[MCDC_F_MAX_COMMIT_TS] = mcdc_cell_int(k->high_ts_us);
    c[MCDC_F_DELETES] = mcdc_cell_int(0);
    c[MCDC_F_INSERTS] = mcdc_cell_int(0);
    c[MCDC_F_UPDATES] = mcdc_cell_int(0);
    c[MCDC_F_STARTED_AT] = mcdc_cell_int(k->started_us);
    c[MCDC_F_DURATION_MS] = mcdc_cell_int(k->duration_ms);
    if (k->has_read) {
        c[MCDC_F_READ_SECONDS] = mcdc_cell_double(round_to(k->read_seconds, 3));
        c[MCDC_F_READ_MB] = mcdc_cell_double(round_to(k->read_mb, 6));
    }
    c[MCDC_F_EVENT] = mcdc_cell_text("snapshot_chunk");
    c[MCDC_F_DETAIL] = mcdc_cell_text(k->detail);
    c[MCDC_F_TARGET] = mcdc_cell_text(k->target);
    c[MCDC_F_WRITTEN_AT] = mcdc_cell_int(mcdc_now_utc_us());
    return mcdc_row_append(rows, c, err);
}

int mcdc_facts_write_event(mcdc_table *facts, const mcdc_facts_event *ev, const char *txn_app_id,
                           int64_t txn_version, bool *skipped, mcdc_error *err) {
    *skipped = false;
    mcdc_schema *fs = NULL;
    mcdc_batch *b = NULL;
    mcdc_appender *a = NULL;
    int rc = mcdc_facts_schema(&fs, err);
    if (rc == MCDC_OK) rc = mcdc_batch_create(&b, fs, 1, err);
    if (rc == MCDC_OK) rc = mcdc_facts_append_event(b, ev, err);
    if (rc == MCDC_OK) rc = mcdc_batch_seal(b, err);
    mcdc_table_props props = {.kind = MCDC_KIND_FACTS};
    if (rc == MCDC_OK) rc = mcdc_appender_open(&a, facts, fs, &props, err);
    if (rc == MCDC_OK) rc = mcdc_appender_write(a, b, err);
    int64_t version;
    if (rc == MCDC_OK)
        rc = mcdc_appender_commit(a, txn_app_id, txn_app_id ? txn_version : 0, NULL, skipped,
                                  &version, err);
    mcdc_appender_free(a);
    mcdc_batch_free(b);
    mcdc_schema_unref(fs);
    if (rc) mcdc_error_wrap(err, "writing the '%s' event to %s", ev->event, mcdc_table_name(facts));
    return rc;
}
