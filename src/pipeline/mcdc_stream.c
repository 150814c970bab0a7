/* mcdc_stream.c - the micro-batch engine (see mcdc_stream.h). */
#include "mcdc_stream.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcdc_changes.h"
#include "mcdc_lake.h"
#include "mcdc_lsn.h"
#include "mcdc_storage.h"
#include "mcdc_tables.h"

static volatile sig_atomic_t g_stop;

void mcdc_stream_request_stop(void) { g_stop = 1; }
bool mcdc_stream_stop_requested(void) { return g_stop != 0; }

void mcdc_crash_point(const char *point, int64_t batch_id) {
    const char *env = getenv("MCDC_CRASH_AT");
    if (env == NULL) return;
    size_t n = strlen(point);
    if (strncmp(env, point, n) != 0) return;
    if (env[n] == ':') {
        int64_t want;
        if (mcdc_parse_i64(env + n + 1, &want) || want != batch_id) return;
    } else if (env[n] != 0) {
        return;
    }
    fprintf(stderr, "mssql-cdc: MCDC_CRASH_AT=%s: killing the process at batch %lld\n", env,
            (long long)batch_id);
    fflush(stderr);
    raise(SIGKILL);
}

/* ---- offsets ---------------------------------------------------------------
 * {"lsn": "0x...", "commit_ts": "YYYY-MM-DDTHH:MM:SS.mmm" or ""}: the last
 * processed commit and its UTC commit time (reference offset contract). */
typedef struct {
    mcdc_lsn lsn;
    int64_t commit_us;
    bool has_ts;
} offset_t;

static json_t *offset_json(const offset_t *o) {
    char lsn[MCDC_LSN_TEXT_LEN + 1], ts[32] = "";
    mcdc_lsn_format(&o->lsn, lsn);
    if (o->has_ts) mcdc_format_ts_us(o->commit_us, 3, ts);
    return json_pack("{s:s, s:s}", "lsn", lsn, "commit_ts", ts);
}

static int offset_parse(offset_t *o, json_t *j, const char *path, mcdc_error *err) {
    const char *lsn = json_string_value(json_object_get(j, "lsn"));
    const char *ts = json_string_value(json_object_get(j, "commit_ts"));
    if (lsn == NULL || ts == NULL)
        return mcdc_error_set(err, MCDC_E_CORRUPT, "%s: an offset lacks \"lsn\" or \"commit_ts\"",
                              path);
    int rc = mcdc_lsn_parse_cstr(&o->lsn, lsn, err);
    if (rc) return mcdc_error_wrap(err, "%s", path), MCDC_E_CORRUPT;
    o->has_ts = *ts != 0;
    o->commit_us = 0;
    if (o->has_ts && mcdc_parse_ts_us(ts, strlen(ts), &o->commit_us, err))
        return mcdc_error_wrap(err, "%s", path), MCDC_E_CORRUPT;
    return MCDC_OK;
}

/* ---- checkpoint directory ---------------------------------------------------
 *   metadata        {"app_id", "capture_instance", "target", "created"}
 *   offsets/<id>    {"batch_id", "start": offset, "end": offset}  (write-ahead)
 *   commits/<id>    {"batch_id", "rows"}                           (done)
 * Kept on the same storage seam as the Delta log: every file is created
 * put-if-absent, so two runs on one checkpoint cannot both plan a batch. */
typedef struct {
    mcdc_storage *st;
    const char *dir; /* for messages */
} ckpt_t;

/* Checkpoint files are a few hundred bytes; anything larger is damage. */
#define CKPT_FILE_BYTES_MAX (1024 * 1024)

static int ckpt_put(ckpt_t *c, const char *key, json_t *j, mcdc_error *err) {
    if (j == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory building %s", key);
    char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    if (text == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory writing %s", key);
    int rc = mcdc_storage_put_if_absent(c->st, key, text, strlen(text), err);
    free(text);
    return rc;
}

static json_t *ckpt_get(ckpt_t *c, const char *key, mcdc_error *err) {
    mcdc_buf b = {0};
    json_t *j = NULL;
    if (mcdc_storage_get(c->st, key, CKPT_FILE_BYTES_MAX, &b, err) == MCDC_OK) {
        json_error_t je;
        j = json_loadb((const char *)b.data, b.len, 0, &je);
        if (j == NULL)
            mcdc_error_set(err, MCDC_E_CORRUPT,
                           "%s/%s is not valid JSON (line %d: %s); the checkpoint is damaged: "
                           "restore it, or start over with a new checkpoint and a new app_id",
                           c->dir, key, je.line, je.text);
    }
    mcdc_buf_free(&b);
    return j;
}

static int ckpt_open(ckpt_t *c, const mcdc_stream_cfg *cfg, const char *ci, mcdc_error *err) {
    c->dir = cfg->checkpoint;
    int rc = mcdc_storage_local_create(&c->st, cfg->checkpoint, err);
    if (rc) return rc;
    char now[32];
    mcdc_format_ts_us(mcdc_now_utc_us(), 3, now);
    rc = ckpt_put(c, "metadata",
                  json_pack("{s:s, s:s, s:s, s:s}", "app_id", cfg->app_id, "capture_instance", ci,
                            "target", cfg->target, "created", now),
                  err);
    if (rc != MCDC_OK && rc != MCDC_E_CONFLICT) return rc;
    json_t *m = ckpt_get(c, "metadata", err);
    if (m == NULL) return MCDC_E_CORRUPT;
    const char *app = json_string_value(json_object_get(m, "app_id"));
    rc = MCDC_OK;
    if (app == NULL || strcmp(app, cfg->app_id) != 0)
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "checkpoint %s belongs to app_id '%s', not '%s': a checkpoint and its "
                            "app_id go together (a new checkpoint needs a new app_id)",
                            c->dir, app ? app : "?", cfg->app_id);
    json_decref(m);
    return rc;
}

/* Highest numbered file under dir ("offsets/"), or -1. */
static int ckpt_last(ckpt_t *c, const char *dir, int64_t *out, mcdc_error *err) {
    mcdc_storage_listing l = {0};
    *out = -1;
    int rc = mcdc_storage_list(c->st, dir, &l, err);
    for (size_t i = 0; rc == MCDC_OK && i < l.count; i++) {
        int64_t v;
        if (mcdc_parse_i64(l.entries[i].name, &v) == MCDC_OK && v > *out) *out = v;
    }
    mcdc_storage_listing_free(&l);
    return rc;
}

static int ckpt_read_offsets(ckpt_t *c, int64_t id, offset_t *start, offset_t *end,
                             mcdc_error *err) {
    char key[64];
    snprintf(key, sizeof key, "offsets/%lld", (long long)id);
    json_t *j = ckpt_get(c, key, err);
    if (j == NULL) return MCDC_E_CORRUPT;
    int rc = offset_parse(start, json_object_get(j, "start"), key, err);
    if (rc == MCDC_OK) rc = offset_parse(end, json_object_get(j, "end"), key, err);
    json_decref(j);
    return rc;
}

/* ---- one batch ----------------------------------------------------------- */
typedef struct {
    int64_t rows, deletes, inserts, updates;
    char min_lsn[24], max_lsn[24];
    int64_t min_ts, max_ts;
} batch_stats;

static void stats_add(batch_stats *s, const mcdc_batch *b) {
    int32_t lsn_col = mcdc_schema_find(b->schema, "_start_lsn");
    int32_t op_col = mcdc_schema_find(b->schema, "_operation");
    int32_t ts_col = mcdc_schema_find(b->schema, "_commit_ts");
    MCDC_ASSERT(lsn_col >= 0 && op_col >= 0 && ts_col >= 0);
    const mcdc_column *lc = &b->columns[lsn_col], *oc = &b->columns[op_col],
                      *tc = &b->columns[ts_col];
    MCDC_ASSERT(oc->field->type == MCDC_TYPE_INT32 && tc->field->type == MCDC_TYPE_TIMESTAMP_NTZ);
    const int32_t *ops = (const int32_t *)(const void *)oc->values;
    const int64_t *ts = (const int64_t *)(const void *)tc->values;
    for (int64_t r = 0; r < b->rows; r++) {
        s->deletes += ops[r] == 1;
        s->inserts += ops[r] == 2;
        s->updates += ops[r] == 4;
        if (s->rows + r == 0 || ts[r] < s->min_ts) s->min_ts = ts[r];
        if (s->rows + r == 0 || ts[r] > s->max_ts) s->max_ts = ts[r];
    }
    /* LSNs are fixed-width text: string order is LSN order. */
    for (int64_t r = 0; r < b->rows; r++) {
        const char *v = (const char *)lc->data + lc->offsets[r];
        int32_t n = lc->offsets[r + 1] - lc->offsets[r];
        if (n != MCDC_LSN_TEXT_LEN) continue;
        if (s->min_lsn[0] == 0 || memcmp(v, s->min_lsn, (size_t)n) < 0) memcpy(s->min_lsn, v, (size_t)n);
        if (s->max_lsn[0] == 0 || memcmp(v, s->max_lsn, (size_t)n) > 0) memcpy(s->max_lsn, v, (size_t)n);
    }
    s->rows += b->rows;
}

/* The reading side: one thread per range, batches through a bounded queue
 * to the writing thread (Parquet encoding and compression happen there, off
 * the reading threads). */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t can_put, can_get;
    mcdc_batch *items[MCDC_QUEUE_DEPTH_MAX];
    int head, count, producers;
    bool failed;
} queue_t;

typedef struct {
    queue_t *q;
    mcdc_changes *changes;
    const mcdc_range *range;
    mcdc_reader_metrics metrics;
    mcdc_error err;
    int rc;
} reader_job;

static int queue_put(void *ctx, mcdc_batch *b, mcdc_error *err) {
    queue_t *q = ctx;
    pthread_mutex_lock(&q->mu);
    while (q->count == MCDC_QUEUE_DEPTH_MAX && !q->failed) pthread_cond_wait(&q->can_put, &q->mu);
    if (q->failed) {
        pthread_mutex_unlock(&q->mu);
        mcdc_batch_free(b);
        return mcdc_error_set(err, MCDC_E_CANCELLED, "the batch was abandoned");
    }
    q->items[(q->head + q->count) % MCDC_QUEUE_DEPTH_MAX] = b;
    q->count++;
    pthread_cond_signal(&q->can_get);
    pthread_mutex_unlock(&q->mu);
    return MCDC_OK;
}

static void *reader_main(void *arg) {
    reader_job *j = arg;
    j->rc = mcdc_changes_read(j->changes, j->range, queue_put, j->q, &j->metrics, &j->err);
    pthread_mutex_lock(&j->q->mu);
    if (j->rc) j->q->failed = true;
    j->q->producers--;
    pthread_cond_broadcast(&j->q->can_get);
    pthread_cond_broadcast(&j->q->can_put);
    pthread_mutex_unlock(&j->q->mu);
    return NULL;
}

/* Pops a batch; NULL when every producer is done and the queue is empty. */
static mcdc_batch *queue_get(queue_t *q) {
    pthread_mutex_lock(&q->mu);
    while (q->count == 0 && q->producers > 0) pthread_cond_wait(&q->can_get, &q->mu);
    mcdc_batch *b = NULL;
    if (q->count) {
        b = q->items[q->head];
        q->head = (q->head + 1) % MCDC_QUEUE_DEPTH_MAX;
        q->count--;
        pthread_cond_signal(&q->can_put);
    }
    pthread_mutex_unlock(&q->mu);
    return b;
}

static void queue_fail(queue_t *q) {
    pthread_mutex_lock(&q->mu);
    q->failed = true;
    pthread_cond_broadcast(&q->can_put);
    pthread_mutex_unlock(&q->mu);
}

typedef struct {
    const mcdc_stream_cfg *cfg;
    const mcdc_opts *opts;
    mcdc_changes *changes;
    mcdc_schema *bronze_schema;
    mcdc_table *bronze, *facts;
    ckpt_t ckpt;
    int num_partitions;
    char facts_app_id[512];
    json_t *warnings; /* collected during a batch, for the facts row's detail */
} stream_t;

static void collect_warning(void *ctx, mcdc_log_level level, const char *msg) {
    stream_t *s = ctx;
    if (level == MCDC_LOG_WARN && s->warnings && json_array_size(s->warnings) < 100)
        json_array_append_new(s->warnings, json_string(msg));
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

typedef struct {
    bool any;
    double rtt_ms, read_seconds, read_mb;
    bool has_rtt, network_known;
    int64_t network_wait_ms;
    mcdc_reader_metrics last;
    bool has_last;
} folded_metrics;

static void fold(folded_metrics *f, reader_job *jobs, int n) {
    memset(f, 0, sizeof *f);
    double rtts[MCDC_PARTITIONS_MAX];
    int nrtt = 0;
    f->network_known = n > 0;
    for (int i = 0; i < n; i++) {
        const mcdc_reader_metrics *m = &jobs[i].metrics;
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

static char *user_metadata(const stream_t *s, int64_t batch_id, const batch_stats *st) {
    char min_ts[32], max_ts[32];
    mcdc_format_ts_us(st->min_ts, 3, min_ts);
    mcdc_format_ts_us(st->max_ts, 3, max_ts);
    json_t *j = json_pack("{s:I, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:s}", "rows",
                          (json_int_t)st->rows, "min_lsn", st->min_lsn, "max_lsn", st->max_lsn,
                          "min_commit_ts", min_ts, "max_commit_ts", max_ts, "deletes",
                          (json_int_t)st->deletes, "inserts", (json_int_t)st->inserts, "updates",
                          (json_int_t)st->updates, "batch_id", (json_int_t)batch_id, "app_id",
                          s->cfg->app_id);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return text;
}

typedef struct {
    bool skipped_data;     /* failOnDataLoss=false skipped a purged range */
    mcdc_lsn skip_from, skip_to;
    int64_t lost_from_us, lost_to_us;
    bool has_lost_from, has_lost_to;
    /* failOnDataLoss=false: cleanup passed a range's start while it was
     * read, so rows of it may be missing (certain: false). */
    bool possible_loss;
    mcdc_lsn possible_from, possible_min;
} batch_events;

/* One data_skipped event row (reference §2.3.4): detail {from, to, certain,
 * [reason]}, min_lsn..max_lsn the skipped range. */
static int append_skip_event(mcdc_batch *b, const stream_t *s, int64_t batch_id,
                             const mcdc_lsn *from_lsn, const mcdc_lsn *to_lsn, bool certain,
                             const char *reason, const batch_events *ev, int64_t written,
                             mcdc_error *err) {
    char from[MCDC_LSN_TEXT_LEN + 1], to[MCDC_LSN_TEXT_LEN + 1];
    mcdc_lsn_format(from_lsn, from);
    mcdc_lsn_format(to_lsn, to);
    json_t *d = json_pack("{s:s, s:s, s:b}", "from", from, "to", to, "certain", certain);
    if (d && reason) json_object_set_new(d, "reason", json_string(reason));
    char *detail = d ? json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(d);
    if (detail == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    mcdc_cell c[MCDC_F_COUNT];
    for (int i = 0; i < MCDC_F_COUNT; i++) c[i] = mcdc_cell_null();
    c[MCDC_F_APP_ID] = mcdc_cell_text(s->cfg->app_id);
    c[MCDC_F_BATCH_ID] = mcdc_cell_int(batch_id);
    c[MCDC_F_ROWS] = mcdc_cell_int(0);
    c[MCDC_F_MIN_LSN] = mcdc_cell_text(from);
    c[MCDC_F_MAX_LSN] = mcdc_cell_text(to);
    c[MCDC_F_EVENT] = mcdc_cell_text("data_skipped");
    if (ev->has_lost_from) c[MCDC_F_LOST_FROM_TS] = mcdc_cell_int(ev->lost_from_us);
    if (certain && ev->has_lost_to) c[MCDC_F_LOST_TO_TS] = mcdc_cell_int(ev->lost_to_us);
    c[MCDC_F_END_LSN] = mcdc_cell_text(to);
    c[MCDC_F_DETAIL] = mcdc_cell_text(detail);
    c[MCDC_F_TARGET] = mcdc_cell_text(s->cfg->target);
    c[MCDC_F_WRITTEN_AT] = mcdc_cell_int(written);
    int rc = mcdc_row_append(b, c, err);
    free(detail);
    return rc;
}

static int write_facts(stream_t *s, int64_t batch_id, const offset_t *end, const batch_stats *st,
                       const folded_metrics *fm, int64_t started_us, int64_t duration_ms,
                       const batch_events *ev, mcdc_error *err) {
    mcdc_schema *fs;
    int rc = mcdc_facts_schema(&fs, err);
    if (rc) return rc;
    mcdc_batch *b;
    rc = mcdc_batch_create(&b, fs, 2, err);
    if (rc) {
        mcdc_schema_unref(fs);
        return rc;
    }
    mcdc_cell c[MCDC_F_COUNT];
    for (int i = 0; i < MCDC_F_COUNT; i++) c[i] = mcdc_cell_null();
    char end_lsn[MCDC_LSN_TEXT_LEN + 1];
    mcdc_lsn_format(&end->lsn, end_lsn);
    c[MCDC_F_APP_ID] = mcdc_cell_text(s->cfg->app_id);
    c[MCDC_F_BATCH_ID] = mcdc_cell_int(batch_id);
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
    c[MCDC_F_STARTED_AT] = mcdc_cell_int(started_us);
    c[MCDC_F_DURATION_MS] = mcdc_cell_int(duration_ms);
    if (fm->any) {
        if (fm->has_rtt) c[MCDC_F_SOURCE_RTT_MS] = mcdc_cell_double(fm->rtt_ms);
        c[MCDC_F_READ_SECONDS] = mcdc_cell_double(fm->read_seconds);
        c[MCDC_F_READ_MB] = mcdc_cell_double(fm->read_mb);
        if (fm->network_known) c[MCDC_F_NETWORK_WAIT_MS] = mcdc_cell_int(fm->network_wait_ms);
        c[MCDC_F_END_LSN] = mcdc_cell_text(end_lsn);
        if (end->has_ts) c[MCDC_F_END_COMMIT_TS] = mcdc_cell_int(end->commit_us);
    }
    if (fm->has_last) {
        const mcdc_reader_metrics *m = &fm->last;
        if (m->retention_watermark_known) {
            c[MCDC_F_RETENTION_WATERMARK_TS] = mcdc_cell_int(m->retention_watermark_ts_us);
            int64_t ref = end->has_ts ? end->commit_us : st->max_ts;
            c[MCDC_F_RETENTION_HEADROOM_HOURS] =
                mcdc_cell_double((double)(ref - m->retention_watermark_ts_us) / 3600e6);
        }
        if (m->source_max_commit_ts_known) {
            c[MCDC_F_SOURCE_MAX_COMMIT_TS] = mcdc_cell_int(m->source_max_commit_ts_us);
            c[MCDC_F_CAPTURE_LAG_SECONDS] = mcdc_cell_double(m->capture_lag_seconds);
            if (end->has_ts)
                c[MCDC_F_INGESTION_LAG_SECONDS] =
                    mcdc_cell_double((double)(m->source_max_commit_ts_us - end->commit_us) / 1e6);
        }
    }
    char *detail = NULL;
    if (json_array_size(s->warnings)) {
        json_t *d = json_pack("{s:O}", "warnings", s->warnings);
        detail = d ? json_dumps(d, JSON_COMPACT) : NULL;
        json_decref(d);
        c[MCDC_F_DETAIL] = mcdc_cell_text(detail);
    }
    c[MCDC_F_TARGET] = mcdc_cell_text(s->cfg->target);
    int64_t written = mcdc_now_utc_us();
    c[MCDC_F_WRITTEN_AT] = mcdc_cell_int(written);
    rc = mcdc_row_append(b, c, err);
    free(detail);
    if (rc == MCDC_OK && ev->skipped_data)
        rc = append_skip_event(b, s, batch_id, &ev->skip_from, &ev->skip_to, true, NULL, ev,
                               written, err);
    if (rc == MCDC_OK && ev->possible_loss) {
        mcdc_lsn to = ev->possible_min;
        mcdc_lsn_decrement(&to, &ev->possible_min, NULL);
        rc = append_skip_event(b, s, batch_id, &ev->possible_from, &to, false,
                               "CDC cleanup moved min_lsn past the range while it was read", ev,
                               written, err);
    }
    if (rc == MCDC_OK) rc = mcdc_batch_seal(b, err);
    mcdc_appender *a = NULL;
    if (rc == MCDC_OK) rc = mcdc_appender_open(&a, s->facts, fs, NULL, err);
    if (rc == MCDC_OK) rc = mcdc_appender_write(a, b, err);
    bool skipped;
    int64_t version;
    if (rc == MCDC_OK)
        rc = mcdc_appender_commit(a, s->facts_app_id, batch_id, NULL, &skipped, &version, err);
    mcdc_appender_free(a);
    mcdc_batch_free(b);
    mcdc_schema_unref(fs);
    if (rc) mcdc_error_wrap(err, "writing the facts row of batch %lld to %s", (long long)batch_id,
                            s->cfg->facts_table);
    return rc;
}

/* Reads the ranges on one thread each; batches reach this thread through
 * the bounded queue and are appended to bronze (unless bronze_done). */
static int read_ranges(stream_t *s, int64_t id, const mcdc_range *ranges, int nranges,
                       bool bronze_done, batch_stats *st, folded_metrics *fm, batch_events *ev,
                       mcdc_appender **app, mcdc_error *err) {
    int rc = MCDC_OK;
    queue_t q;
    memset(&q, 0, sizeof q);
    pthread_mutex_init(&q.mu, NULL);
    pthread_cond_init(&q.can_put, NULL);
    pthread_cond_init(&q.can_get, NULL);
    reader_job *jobs = mcdc_calloc((size_t)(nranges ? nranges : 1), sizeof *jobs);
    pthread_t *threads = mcdc_calloc((size_t)(nranges ? nranges : 1), sizeof *threads);
    int started_threads = 0;
    if (jobs == NULL || threads == NULL) {
        rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory starting readers");
    } else {
        q.producers = nranges;
        for (int i = 0; i < nranges; i++) {
            jobs[i] = (reader_job){.q = &q, .changes = s->changes, .range = &ranges[i]};
            if (pthread_create(&threads[i], NULL, reader_main, &jobs[i]) != 0) {
                pthread_mutex_lock(&q.mu);
                q.producers -= nranges - i;
                q.failed = true;
                pthread_mutex_unlock(&q.mu);
                rc = mcdc_error_set(err, MCDC_E_IO, "cannot start a reader thread");
                break;
            }
            started_threads++;
        }
    }

    mcdc_batch *b;
    while ((b = queue_get(&q)) != NULL) {
        if (rc == MCDC_OK) {
            stats_add(st, b);
            if (!bronze_done && b->rows > 0) {
                if (*app == NULL) rc = mcdc_appender_open(app, s->bronze, s->bronze_schema, NULL, err);
                int32_t n = b->schema->n_fields;
                if (rc == MCDC_OK) rc = mcdc_batch_widen(b, s->bronze_schema, err);
                if (rc == MCDC_OK) rc = mcdc_col_fill_int(&b->columns[n], id, b->rows, err);
                if (rc == MCDC_OK) rc = mcdc_col_append_nulls(&b->columns[n + 1], b->rows, err);
                if (rc == MCDC_OK) rc = mcdc_col_append_nulls(&b->columns[n + 2], b->rows, err);
                if (rc == MCDC_OK) rc = mcdc_appender_write(*app, b, err);
            }
            if (rc) queue_fail(&q);
        }
        mcdc_batch_free(b);
    }
    for (int i = 0; i < started_threads; i++) pthread_join(threads[i], NULL);
    for (int i = 0; i < started_threads && rc == MCDC_OK; i++)
        if (jobs[i].rc && jobs[i].rc != MCDC_E_CANCELLED) {
            rc = jobs[i].rc;
            if (err) *err = jobs[i].err;
        }
    for (int i = 0; i < started_threads && rc == MCDC_OK; i++)
        if (jobs[i].rc) {
            rc = jobs[i].rc;
            if (err) *err = jobs[i].err;
        }
    pthread_mutex_destroy(&q.mu);
    pthread_cond_destroy(&q.can_put);
    pthread_cond_destroy(&q.can_get);

    fold(fm, jobs, rc == MCDC_OK ? started_threads : 0);
    for (int i = 0; rc == MCDC_OK && i < started_threads; i++) {
        const mcdc_reader_metrics *m = &jobs[i].metrics;
        if (!m->data_lost) continue;
        if (!ev->possible_loss || mcdc_lsn_cmp(&ranges[i].from, &ev->possible_from) < 0)
            ev->possible_from = ranges[i].from;
        if (!ev->possible_loss || mcdc_lsn_cmp(&m->min_lsn_after, &ev->possible_min) > 0)
            ev->possible_min = m->min_lsn_after;
        ev->possible_loss = true;
    }
    mcdc_free(jobs);
    mcdc_free(threads);
    return rc;
}

/* Runs batch `id` over (start, end]. */
static int run_batch(stream_t *s, int64_t id, const offset_t *start, const offset_t *end,
                     bool replayed, mcdc_batch_report *rep, mcdc_error *err) {
    memset(rep, 0, sizeof *rep);
    rep->batch_id = id;
    rep->replayed = replayed;
    mcdc_lsn_format(&start->lsn, rep->start_lsn);
    mcdc_lsn_format(&end->lsn, rep->end_lsn);
    rep->end_commit_us = end->commit_us;
    rep->has_end_commit = end->has_ts;
    rep->ingestion_lag_seconds = -1;
    int64_t started = mcdc_now_utc_us(), t0 = mcdc_monotonic_us();
    json_decref(s->warnings);
    s->warnings = json_array();
    mcdc_log_set_hook(collect_warning, s);

    batch_events ev;
    memset(&ev, 0, sizeof ev);
    mcdc_lsn from, min_lsn;
    int rc = mcdc_lsn_increment(&from, &start->lsn, err);
    if (rc == MCDC_OK) rc = mcdc_changes_min_lsn(s->changes, &min_lsn, err);
    if (rc) goto out;
    /* Retention guard before planning (invariant 4). */
    if (!mcdc_lsn_is_zero(&min_lsn) && mcdc_lsn_cmp(&from, &min_lsn) < 0) {
        char f[MCDC_LSN_TEXT_LEN + 1], m[MCDC_LSN_TEXT_LEN + 1];
        mcdc_lsn_format(&from, f);
        mcdc_lsn_format(&min_lsn, m);
        if (mcdc_opts_get_bool(s->opts, "failOnDataLoss")) {
            rc = mcdc_error_set(err, MCDC_E_DATALOSS,
                                "capture instance %s: changes from %s on were purged by CDC "
                                "cleanup (min_lsn is now %s) before this stream read them. "
                                "Re-snapshot the table into a new target with a new checkpoint "
                                "and app_id, or set failOnDataLoss=false to skip the gap",
                                mcdc_changes_capture_instance(s->changes), f, m);
            goto out;
        }
        mcdc_log(MCDC_LOG_WARN, "capture instance %s: skipping purged changes %s..%s "
                                "(failOnDataLoss=false)",
                 mcdc_changes_capture_instance(s->changes), f, m);
        ev.skipped_data = true;
        ev.skip_from = from;
        mcdc_lsn_decrement(&ev.skip_to, &min_lsn, NULL);
        ev.has_lost_from = start->has_ts;
        ev.lost_from_us = start->commit_us;
        bool found = false;
        if (mcdc_changes_commit_time(s->changes, &min_lsn, &ev.lost_to_us, &found, err) == MCDC_OK)
            ev.has_lost_to = found;
        from = min_lsn;
    }

    mcdc_range *ranges = NULL;
    int nranges = 0;
    if (mcdc_lsn_cmp(&from, &end->lsn) <= 0) {
        rc = mcdc_changes_plan(s->changes, &from, &end->lsn, s->num_partitions, &ranges, &nranges,
                               err);
        if (rc) goto out;
    }
    int64_t have;
    rc = mcdc_table_txn_version(s->bronze, s->cfg->app_id, &have, err);
    if (rc) {
        mcdc_free(ranges);
        goto out;
    }
    bool bronze_done = have >= id;
    rep->bronze_skipped = bronze_done;

    batch_stats st;
    memset(&st, 0, sizeof st);
    folded_metrics fm;
    mcdc_appender *app = NULL;
    rc = read_ranges(s, id, ranges, nranges, bronze_done, &st, &fm, &ev, &app, err);
    mcdc_free(ranges);

    if (rc == MCDC_OK && app) {
        char *meta = user_metadata(s, id, &st);
        bool skipped = false;
        int64_t version;
        rc = meta ? mcdc_appender_commit(app, s->cfg->app_id, id, meta, &skipped, &version, err)
                  : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        free(meta);
        if (rc == MCDC_OK && skipped) rep->bronze_skipped = true;
        if (rc) mcdc_error_wrap(err, "appending batch %lld to %s", (long long)id, s->cfg->target);
    }
    mcdc_appender_free(app);
    if (rc) goto out;
    mcdc_crash_point("after_bronze", id);
    int64_t duration_ms = (mcdc_monotonic_us() - t0) / 1000;
    if (s->facts) {
        rc = write_facts(s, id, end, &st, &fm, started, duration_ms, &ev, err);
        if (rc) goto out;
        mcdc_crash_point("after_facts", id);
    }
    rep->rows = st.rows;
    rep->deletes = st.deletes;
    rep->inserts = st.inserts;
    rep->updates = st.updates;
    rep->duration_ms = (double)(mcdc_monotonic_us() - t0) / 1000.0;
    rep->rows_per_s = rep->duration_ms > 0 ? (double)st.rows / (rep->duration_ms / 1000.0) : 0;
    if (fm.has_last && fm.last.source_max_commit_ts_known && end->has_ts)
        rep->ingestion_lag_seconds =
            (double)(fm.last.source_max_commit_ts_us - end->commit_us) / 1e6;
out:
    mcdc_log_set_hook(NULL, NULL);
    return rc;
}

/* Where the next batch ends, or *idle when nothing is new. */
static int next_end(stream_t *s, const offset_t *start, const mcdc_lsn *ceiling, bool has_ceiling,
                    offset_t *end, bool *idle, mcdc_error *err) {
    mcdc_lsn upper;
    int rc = mcdc_changes_max_lsn(s->changes, &upper, err);
    if (rc) return rc;
    if (has_ceiling && mcdc_lsn_cmp(ceiling, &upper) < 0) upper = *ceiling;
    *idle = mcdc_lsn_cmp(&upper, &start->lsn) <= 0;
    if (*idle) return MCDC_OK;
    int64_t max_commits = mcdc_opts_get_int(s->opts, "maxCommitsPerBatch");
    if (max_commits > 0 && s->cfg->trigger != MCDC_TRIGGER_ONCE) {
        mcdc_lsn nth;
        bool found;
        rc = mcdc_changes_nth_commit_after(s->changes, &start->lsn, max_commits, &nth, &found, err);
        if (rc) return rc;
        if (found && mcdc_lsn_cmp(&nth, &upper) < 0) upper = nth;
    }
    end->lsn = upper;
    bool found = false;
    rc = mcdc_changes_commit_time(s->changes, &upper, &end->commit_us, &found, err);
    end->has_ts = found;
    return rc;
}

/* startingLsn for a fresh checkpoint. With "earliest" and a min_lsn of zero,
 * capture has not processed the enable of the instance yet: its change table
 * is empty and its first LSN unknown, so the start waits (*idle) rather than
 * guess an LSN that the retention guard would then call purged. */
static int initial_offset(stream_t *s, offset_t *start, bool *idle, mcdc_error *err) {
    const char *starting = mcdc_opts_get(s->opts, "startingLsn");
    if (starting == NULL) starting = "earliest";
    memset(start, 0, sizeof *start);
    *idle = false;
    if (mcdc_str_ieq(starting, "earliest")) {
        mcdc_lsn min;
        int rc = mcdc_changes_min_lsn(s->changes, &min, err);
        if (rc) return rc;
        if (mcdc_lsn_is_zero(&min)) {
            *idle = true;
            return MCDC_OK;
        }
    }
    int rc = mcdc_changes_initial(s->changes, starting, &start->lsn, err);
    if (rc) return rc;
    bool found = false;
    if (!mcdc_lsn_is_zero(&start->lsn) &&
        (rc = mcdc_changes_commit_time(s->changes, &start->lsn, &start->commit_us, &found, err)))
        return rc;
    start->has_ts = found;
    return MCDC_OK;
}

static int open_tables(stream_t *s, mcdc_error *err) {
    const mcdc_stream_cfg *cfg = s->cfg;
    int rc = mcdc_table_open(&s->bronze, cfg->target, cfg->warehouse, err);
    if (rc == MCDC_OK && cfg->facts_table)
        rc = mcdc_table_open(&s->facts, cfg->facts_table, cfg->warehouse, err);
    return rc;
}

/* A checkpoint deleted or rewound under the same app_id would make Delta
 * skip every write as a duplicate (reference crash point 5). A batch planned
 * afresh must be newer than anything app_id wrote; a replayed one may equal
 * it. Checked on facts and on bronze, so a stream without facts is covered. */
static int check_rewind(stream_t *s, int64_t first_id, bool replay, mcdc_error *err) {
    int64_t allowed = replay ? first_id : first_id - 1;
    struct {
        mcdc_table *t;
        const char *app_id, *name;
    } tables[2] = {{s->facts, s->facts_app_id, s->cfg->facts_table},
                   {s->bronze, s->cfg->app_id, s->cfg->target}};
    for (int i = 0; i < 2; i++) {
        if (tables[i].t == NULL) continue;
        int64_t have;
        int rc = mcdc_table_txn_version(tables[i].t, tables[i].app_id, &have, err);
        if (rc) return rc;
        if (have > allowed)
            return mcdc_error_set(
                err, MCDC_E_INVALID,
                "app_id '%s' already wrote batch %lld to %s, but the checkpoint %s is at batch "
                "%lld: the checkpoint was deleted or rewound, and Delta would skip every new "
                "write as a duplicate. Use a new app_id with a new checkpoint",
                s->cfg->app_id, (long long)have, tables[i].name, s->cfg->checkpoint,
                (long long)first_id);
    }
    return MCDC_OK;
}

static void sleep_until(int64_t deadline_us) {
    while (!g_stop) {
        int64_t left = deadline_us - mcdc_monotonic_us();
        if (left <= 0) return;
        mcdc_sleep_ms(left > 50000 ? 50 : (left + 999) / 1000);
    }
}

/* A captured column named like one of ours (_start_lsn, _batch_id, ... in
 * any case) would collide in bronze: refused before anything is read, as the
 * reference refuses it at load. The captured columns follow _commit_ts. */
static int check_reserved(const mcdc_schema *out, mcdc_error *err) {
    int32_t first = mcdc_schema_find(out, "_commit_ts") + 1;
    MCDC_ASSERT(first > 0);
    for (int32_t i = first; i < out->n_fields; i++)
        if (mcdc_is_reserved_column(out->fields[i].name))
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "the capture instance captures a column named '%s', which "
                                  "mssql-cdc reserves for its own columns: leave it out of "
                                  "@captured_column_list, or pass the option columns without it",
                                  out->fields[i].name);
    return MCDC_OK;
}

int mcdc_stream_run(const mcdc_opts *opts, const mcdc_stream_cfg *cfg, mcdc_report_fn fn,
                    void *ctx, mcdc_error *err) {
    MCDC_ASSERT(opts && cfg && cfg->target && cfg->app_id && cfg->checkpoint);
    stream_t s;
    memset(&s, 0, sizeof s);
    s.cfg = cfg;
    s.opts = opts;
    snprintf(s.facts_app_id, sizeof s.facts_app_id, "%s#facts", cfg->app_id);
    int64_t np = mcdc_opts_get_int(opts, "numPartitions");
    if (np <= 0) np = sysconf(_SC_NPROCESSORS_ONLN);
    if (np < 1) np = 1;
    if (np > MCDC_PARTITIONS_MAX) np = MCDC_PARTITIONS_MAX;
    s.num_partitions = (int)np;

    /* Options of the reference this release accepts but does not act on. */
    static const char *const inert[] = {"metricsPath", "schemaChangePolicy", "lockTimeoutMs",
                                        "isolationLevel", "snapshotLsn", "snapshotChunks",
                                        "snapshotKeys"};
    for (size_t i = 0; i < sizeof inert / sizeof inert[0]; i++)
        if (mcdc_opts_is_set(opts, inert[i]))
            mcdc_log(MCDC_LOG_WARN, "option %s has no effect in this release%s", inert[i],
                     strcmp(inert[i], "metricsPath") == 0
                         ? ": the stream's metrics travel in-process"
                         : "");
    int rc = mcdc_changes_open(&s.changes, opts, err);
    if (rc == MCDC_OK) rc = check_reserved(mcdc_changes_schema(s.changes), err);
    if (rc == MCDC_OK) rc = mcdc_bronze_schema(&s.bronze_schema, mcdc_changes_schema(s.changes), err);
    if (rc == MCDC_OK) rc = ckpt_open(&s.ckpt, cfg, mcdc_changes_capture_instance(s.changes), err);
    if (rc == MCDC_OK) rc = open_tables(&s, err);
    if (rc) goto done;

    /* Where are we? The last planned batch is replayed unless committed. */
    int64_t last_planned, last_committed;
    rc = ckpt_last(&s.ckpt, "offsets/", &last_planned, err);
    if (rc == MCDC_OK) rc = ckpt_last(&s.ckpt, "commits/", &last_committed, err);
    if (rc) goto done;
    offset_t start, end;
    int64_t next_id;
    bool replay = false;
    /* A fresh checkpoint starts at startingLsn, resolved when the first
     * batch is planned (see initial_offset). */
    bool initial_pending = last_planned < 0;
    memset(&start, 0, sizeof start);
    if (initial_pending) {
        next_id = 0;
    } else {
        rc = ckpt_read_offsets(&s.ckpt, last_planned, &start, &end, err);
        if (rc) goto done;
        if (last_committed >= last_planned) {
            start = end;
            next_id = last_planned + 1;
        } else {
            replay = true;
            next_id = last_planned;
        }
    }
    rc = check_rewind(&s, next_id, replay, err);
    if (rc) goto done;
    /* A run killed between a batch's commit and its verdict left the verdict
     * behind: bring it up to the last committed batch now rather than wait
     * for new data (idempotent: the verdict never moves back). */
    if (cfg->control_table && !initial_pending && !replay && start.has_ts) {
        mcdc_verdict v;
        char lsn[MCDC_LSN_TEXT_LEN + 1];
        mcdc_lsn_format(&start.lsn, lsn);
        rc = mcdc_verdict_advance(&v, cfg->control_table, cfg->warehouse, mcdc_table_name(s.bronze),
                                  lsn, start.commit_us, cfg->granularity, err);
        if (rc) goto done;
    }

    mcdc_lsn ceiling;
    bool has_ceiling = false;
    if (cfg->trigger == MCDC_TRIGGER_AVAILABLE_NOW) {
        rc = mcdc_changes_max_lsn(s.changes, &ceiling, err);
        if (rc) goto done;
        has_ceiling = true;
    }
    int64_t batches = 0;
    int64_t idle_poll_ms = cfg->trigger == MCDC_TRIGGER_PROCESSING_TIME ? cfg->processing_time_ms : 10;
    while (!g_stop) {
        int64_t tick = mcdc_monotonic_us();
        if (!replay) {
            bool idle = false;
            if (initial_pending) {
                rc = initial_offset(&s, &start, &idle, err);
                if (rc) break;
                initial_pending = idle;
            }
            if (!idle) rc = next_end(&s, &start, &ceiling, has_ceiling, &end, &idle, err);
            if (rc) break;
            if (idle) {
                if (cfg->trigger == MCDC_TRIGGER_AVAILABLE_NOW || cfg->trigger == MCDC_TRIGGER_ONCE)
                    break;
                sleep_until(tick + idle_poll_ms * 1000);
                continue;
            }
            char key[64];
            snprintf(key, sizeof key, "offsets/%lld", (long long)next_id);
            rc = ckpt_put(&s.ckpt, key,
                          json_pack("{s:I, s:o, s:o}", "batch_id", (json_int_t)next_id, "start",
                                    offset_json(&start), "end", offset_json(&end)),
                          err);
            if (rc == MCDC_E_CONFLICT)
                mcdc_error_wrap(err, "another run is using checkpoint %s", s.ckpt.dir);
            if (rc) break;
            mcdc_crash_point("after_plan", next_id);
        }
        mcdc_batch_report rep;
        rc = run_batch(&s, next_id, &start, &end, replay, &rep, err);
        if (rc) break;
        char key[64];
        snprintf(key, sizeof key, "commits/%lld", (long long)next_id);
        rc = ckpt_put(&s.ckpt, key, json_pack("{s:I, s:I}", "batch_id", (json_int_t)next_id, "rows",
                                      (json_int_t)rep.rows),
                      err);
        if (rc == MCDC_E_CONFLICT) rc = MCDC_OK; /* a replay already marked it */
        if (rc) break;
        mcdc_crash_point("after_commit", next_id);
        if (cfg->control_table && end.has_ts) {
            mcdc_verdict v;
            mcdc_crash_point("during_verdict", next_id);
            rc = mcdc_verdict_advance(&v, cfg->control_table, cfg->warehouse,
                                      mcdc_table_name(s.bronze), rep.end_lsn, end.commit_us,
                                      cfg->granularity, err);
            if (rc) break;
            rep.has_verdict = v.found;
            rep.finalized_until_us = v.finalized_until_us;
        }
        if (fn) fn(ctx, &rep);
        start = end;
        next_id++;
        replay = false;
        batches++;
        if (cfg->max_batches > 0 && batches >= cfg->max_batches) break;
        if (cfg->trigger == MCDC_TRIGGER_ONCE) break;
        if (cfg->trigger == MCDC_TRIGGER_PROCESSING_TIME) sleep_until(tick + idle_poll_ms * 1000);
    }
done:
    json_decref(s.warnings);
    mcdc_table_close(s.bronze);
    mcdc_table_close(s.facts);
    mcdc_schema_unref(s.bronze_schema);
    mcdc_changes_close(s.changes);
    mcdc_storage_free(s.ckpt.st);
    return rc;
}
