/*
 * mcdc_api_source.c - a source's positions for engines that plan their own
 * batches (include/mssqlcdc.h, "A source's positions"): max_lsn, the n-th
 * commit after an LSN, commit times and startingLsn, on the change feed's
 * control connection (mcdc_changes.h), which reconnects and retries; and
 * a batch planned with the stream's guards (the capture-instance cut, the
 * DDL checks, the retention guard) into range tokens.
 *
 * The handle follows the table's capture instances as the stream does
 * (mcdc_changes_settings.follow): its schema is the union of their columns.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "mcdc_changes.h"
#include "mcdc_options.h"
#include "mcdc_range_plan.h"

struct mcdc_source {
    mcdc_opts *opts; /* the changes handle borrows some of its strings */
    mcdc_changes *changes;
};

void mcdc_source_free(mcdc_source *s) {
    if (s == NULL) return;
    mcdc_changes_close(s->changes);
    mcdc_opts_free(s->opts);
    mcdc_free(s);
}

int mcdc_source_open(mcdc_source **out, const mcdc_opts *opts, mcdc_error *err) {
    if (out == NULL || opts == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_source_open: %s is NULL",
                              out == NULL ? "out" : "opts");
    *out = NULL;
    int rc = mcdc_opts_check_required(opts, err);
    if (rc) return rc;
    mcdc_source *s = mcdc_calloc(1, sizeof *s);
    if (s == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory opening a source");
    rc = mcdc_opts_clone(&s->opts, opts, err);
    mcdc_changes_settings follow = {.follow = true};
    if (rc == MCDC_OK) rc = mcdc_changes_open(&s->changes, s->opts, &follow, err);
    if (rc) {
        mcdc_source_free(s);
        return rc;
    }
    *out = s;
    return MCDC_OK;
}

static void to_value(mcdc_lsn_value *out, const mcdc_lsn *l) {
    _Static_assert(sizeof out->bytes == MCDC_LSN_BYTES, "an LSN is 10 bytes");
    memcpy(out->bytes, l->b, MCDC_LSN_BYTES);
}

static int check_args(const mcdc_source *s, const void *a, const void *b, const char *fn,
                      mcdc_error *err) {
    if (s == NULL || a == NULL || b == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "%s: %s is NULL", fn,
                              s == NULL ? "the source" : "an argument");
    return MCDC_OK;
}

int mcdc_source_initial_lsn(mcdc_source *s, const char *starting_lsn, mcdc_lsn_value *out,
                            mcdc_error *err) {
    int rc = check_args(s, out, out, "mcdc_source_initial_lsn", err);
    mcdc_lsn l;
    if (rc == MCDC_OK) rc = mcdc_changes_initial(s->changes, starting_lsn, &l, err);
    if (rc == MCDC_OK) to_value(out, &l);
    return rc;
}

int mcdc_source_max_lsn(mcdc_source *s, mcdc_lsn_value *out, mcdc_error *err) {
    int rc = check_args(s, out, out, "mcdc_source_max_lsn", err);
    mcdc_lsn l;
    if (rc == MCDC_OK) rc = mcdc_changes_max_lsn(s->changes, &l, err);
    if (rc == MCDC_OK) to_value(out, &l);
    return rc;
}

int mcdc_source_nth_commit_after(mcdc_source *s, const mcdc_lsn_value *after, int64_t n,
                                 mcdc_lsn_value *out, bool *found, mcdc_error *err) {
    int rc = check_args(s, after, out, "mcdc_source_nth_commit_after", err);
    if (rc == MCDC_OK && found == NULL)
        rc = mcdc_error_set(err, MCDC_E_INVALID, "mcdc_source_nth_commit_after: found is NULL");
    if (rc == MCDC_OK && n < 1)
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "mcdc_source_nth_commit_after: n is %lld; it counts commits from 1",
                            (long long)n);
    if (rc) return rc;
    mcdc_lsn start = mcdc_lsn_from_bytes(after->bytes), l;
    memset(&l, 0, sizeof l);
    *found = false;
    rc = mcdc_changes_nth_commit_after(s->changes, &start, n, &l, found, err);
    if (rc == MCDC_OK) to_value(out, &l);
    return rc;
}

int mcdc_source_commit_time(mcdc_source *s, const mcdc_lsn_value *lsn, int64_t *utc_us,
                            bool *found, mcdc_error *err) {
    int rc = check_args(s, lsn, utc_us, "mcdc_source_commit_time", err);
    if (rc == MCDC_OK && found == NULL)
        rc = mcdc_error_set(err, MCDC_E_INVALID, "mcdc_source_commit_time: found is NULL");
    if (rc) return rc;
    mcdc_lsn l = mcdc_lsn_from_bytes(lsn->bytes);
    *found = false;
    *utc_us = 0;
    return mcdc_changes_commit_time_exact(s->changes, &l, utc_us, found, err);
}

int mcdc_source_commit_at(mcdc_source *s, int64_t utc_us, mcdc_lsn_value *out, bool *found,
                          mcdc_error *err) {
    int rc = check_args(s, out, out, "mcdc_source_commit_at", err);
    if (rc == MCDC_OK && found == NULL)
        rc = mcdc_error_set(err, MCDC_E_INVALID, "mcdc_source_commit_at: found is NULL");
    if (rc) return rc;
    *found = false;
    memset(out->bytes, 0, sizeof out->bytes);
    /* A time after the server's clock would map to the last commit, and the
     * commits between it and that time would be missed. */
    int64_t now;
    rc = mcdc_changes_server_now(s->changes, &now, err);
    if (rc == MCDC_OK && utc_us > now) {
        char t[32], n[32];
        mcdc_format_ts_us(utc_us, 3, t);
        mcdc_format_ts_us(now, 3, n);
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "%s UTC is later than the server's clock (%s UTC): check the time "
                              "zone", t, n);
    }
    mcdc_lsn l;
    memset(&l, 0, sizeof l);
    if (rc == MCDC_OK) rc = mcdc_changes_time_to_lsn(s->changes, utc_us, &l, found, err);
    if (rc == MCDC_OK && *found) to_value(out, &l);
    return rc;
}

/* ---- a batch with the stream's guards ------------------------------------------------ */

int mcdc_source_schema(struct ArrowSchema *out, mcdc_source *s, mcdc_error *err) {
    int rc = check_args(s, out, out, "mcdc_source_schema", err);
    if (rc) return rc;
    return mcdc_schema_export(mcdc_changes_schema(s->changes), out, err);
}

int mcdc_source_batch_end(mcdc_source *s, const mcdc_lsn_value *start, mcdc_lsn_value *end,
                          bool *cut, mcdc_error *err) {
    int rc = check_args(s, start, end, "mcdc_source_batch_end", err);
    if (rc == MCDC_OK && cut == NULL)
        rc = mcdc_error_set(err, MCDC_E_INVALID, "mcdc_source_batch_end: cut is NULL");
    if (rc) return rc;
    mcdc_lsn from = mcdc_lsn_from_bytes(start->bytes), to = mcdc_lsn_from_bytes(end->bytes);
    char ci[MCDC_IDENT_BYTES_MAX + 1];
    *cut = false;
    if (mcdc_lsn_cmp(&to, &from) <= 0) return MCDC_OK;
    rc = mcdc_changes_follow_end(s->changes, &from, NULL, &to, cut, ci, err);
    if (rc == MCDC_OK) to_value(end, &to);
    return rc;
}

/* One event of the batch as the events' JSON holds it. */
static int add_event(json_t *events, const char *kind, const char *ci, const mcdc_lsn *lsn,
                     bool has_ts, int64_t commit_us, const char *detail, mcdc_error *err) {
    char l[MCDC_LSN_TEXT_LEN + 1], ts[32] = "";
    mcdc_lsn_format(lsn, l);
    if (has_ts) mcdc_format_ts_us(commit_us, 3, ts);
    json_t *e = json_pack("{s:s, s:s, s:s, s:s?, s:s?}", "event", kind, "capture_instance", ci,
                          "lsn", l, "commit_ts", has_ts ? ts : NULL, "detail", detail);
    if (e == NULL || json_array_append_new(events, e) != 0)
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory planning a batch");
    return MCDC_OK;
}

/* The retention guard of a piece before its ranges are planned (invariant
 * 4, per capture instance): a purge past its start is DataLossError, or,
 * with failOnDataLoss=false, the piece starts at min_lsn and the gap is a
 * data_skipped event (and a warning). */
static int guard_piece(mcdc_source *s, mcdc_changes_piece *p, json_t *events, mcdc_error *err) {
    mcdc_piece_loss l;
    int rc = mcdc_changes_piece_loss(s->changes, p, &l, err);
    if (rc || !l.lost) return rc;
    if (mcdc_opt_fail_on_data_loss(s->opts))
        return mcdc_error_set(err, MCDC_E_DATALOSS,
                              "capture instance %s: change data from %s is gone (min_lsn is now "
                              "%s): purged by CDC cleanup%s%s%s before the stream read it. A "
                              "re-snapshot is required. Set failOnDataLoss=false to skip ahead "
                              "(loses changes)",
                              p->ci, l.from, l.min,
                              l.gone[0] ? ", or held only by capture instance " : "",
                              l.gone, l.gone[0] ? ", disabled too early" : "");
    mcdc_log(MCDC_LOG_WARN, "capture instance %s: change data from %s up to min_lsn %s is gone; "
                            "failOnDataLoss=false skips it, and those changes are lost",
             p->ci, l.from, l.min);
    char detail[128];
    snprintf(detail, sizeof detail, "{\"from_lsn\":\"%s\",\"to_lsn\":\"%s\"}", l.from, l.min);
    int64_t us = 0;
    bool found = false;
    rc = mcdc_changes_commit_time(s->changes, &l.min_lsn, &us, &found, err);
    if (rc == MCDC_OK) rc = add_event(events, "data_skipped", p->ci, &p->from, found, us, detail, err);
    p->from = l.min_lsn;
    return rc;
}

/* The batch's pieces guarded and checked, then their ranges, at most
 * n_max in all (each piece gets its share, at least one). */
static int plan_pieces(mcdc_source *s, mcdc_changes_batch *b, int n_max, json_t *events,
                       mcdc_lsn_range **out, const char ***cis, int *n_out, mcdc_error *err) {
    int rc = MCDC_OK, live = 0;
    *out = NULL;
    *cis = NULL;
    *n_out = 0;
    for (int i = 0; rc == MCDC_OK && i < b->n_pieces; i++) {
        rc = guard_piece(s, &b->pieces[i], events, err);
        if (rc == MCDC_OK && mcdc_lsn_cmp(&b->pieces[i].from, &b->pieces[i].to) <= 0) {
            rc = mcdc_changes_piece_check(s->changes, &b->pieces[i], err);
            live++;
        }
    }
    if (rc || live == 0) return rc; /* invariant 3: cleanup may have left nothing */
    int share = n_max / live > 0 ? n_max / live : 1;
    *out = mcdc_calloc((size_t)(share * live), sizeof **out);
    *cis = mcdc_calloc((size_t)(share * live), sizeof **cis);
    if (*out == NULL || *cis == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    for (int i = 0; rc == MCDC_OK && i < b->n_pieces; i++) {
        const mcdc_changes_piece *p = &b->pieces[i];
        if (mcdc_lsn_cmp(&p->from, &p->to) > 0) continue;
        mcdc_lsn_range *r = NULL;
        int n = 0;
        rc = mcdc_changes_plan_piece(s->changes, p, share, &r, &n, err);
        MCDC_ASSERT(rc != MCDC_OK || (n >= 1 && n <= share));
        for (int k = 0; rc == MCDC_OK && k < n; k++) {
            (*out)[*n_out] = r[k];
            (*cis)[(*n_out)++] = p->ci;
        }
        mcdc_free(r);
    }
    return rc;
}

int mcdc_source_plan_batch(mcdc_range_plan **out, mcdc_source *s, const mcdc_lsn_value *start,
                           const mcdc_lsn_value *end, int ranges_max, mcdc_error *err) {
    int rc = check_args(s, start, end, "mcdc_source_plan_batch", err);
    if (rc == MCDC_OK && out == NULL)
        rc = mcdc_error_set(err, MCDC_E_INVALID, "mcdc_source_plan_batch: out is NULL");
    if (rc == MCDC_OK && (ranges_max < 0 || ranges_max > MCDC_PARTITIONS_MAX))
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "mcdc_source_plan_batch: ranges_max is %d; use 1 to %d, or 0 for "
                            "the numPartitions option",
                            ranges_max, MCDC_PARTITIONS_MAX);
    if (rc) return rc;
    *out = NULL;
    int n_max = ranges_max ? ranges_max : mcdc_opt_num_partitions(s->opts);
    mcdc_lsn from = mcdc_lsn_from_bytes(start->bytes), to = mcdc_lsn_from_bytes(end->bytes);
    json_t *events = json_array();
    if (events == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    mcdc_changes_batch b;
    memset(&b, 0, sizeof b);
    mcdc_lsn_range *r = NULL;
    const char **cis = NULL;
    int n = 0;
    if (mcdc_lsn_cmp(&to, &from) > 0) {
        /* The schema checks come first: a batch that fails them reads nothing. */
        rc = mcdc_changes_batch_plan(s->changes, &from, NULL, &to, &b, err);
        if (rc == MCDC_OK) rc = plan_pieces(s, &b, n_max, events, &r, &cis, &n, err);
        for (int i = 0; rc == MCDC_OK && i < b.n_events; i++)
            rc = add_event(events, b.events[i].event, mcdc_changes_capture_instance(s->changes),
                           &b.events[i].lsn, b.events[i].has_commit_ts, b.events[i].commit_us,
                           b.events[i].detail, err);
    }
    char *text = NULL;
    if (rc == MCDC_OK) {
        char *dumped = json_dumps(events, JSON_COMPACT);
        text = dumped ? mcdc_strdup(dumped) : NULL;
        free(dumped); /* jansson's */
        if (text == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    if (rc == MCDC_OK)
        rc = mcdc_range_plan_build(out, mcdc_changes_schema(s->changes), true, cis, r, n, text,
                                   err);
    mcdc_free(cis);
    mcdc_free(r);
    mcdc_changes_batch_free(&b);
    json_decref(events);
    return rc;
}
