/*
 * mcdc_api_source.c - a source's positions for engines that plan their own
 * batches (include/mssqlcdc.h, "A source's positions"): max_lsn, the n-th
 * commit after an LSN, commit times and startingLsn, on the change feed's
 * control connection (mcdc_changes.h), which reconnects and retries.
 */
#include <string.h>

#include "mcdc_changes.h"
#include "mcdc_options.h"

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
    if (rc == MCDC_OK) rc = mcdc_changes_open(&s->changes, s->opts, NULL, err);
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
