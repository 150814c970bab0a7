/* cli_stream.c - what 'stream' and 'start-many' share: the flags that
 * configure a stream job and the line each committed batch prints (cli.h). */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cli.h"

/* An enum flag's value among names (any case): its index, or -1. */
static int pick(const char *v, const char *const *names, int n) {
    for (int k = 0; k < n; k++)
        if (strcasecmp(v, names[k]) == 0) return k;
    return -1;
}

int cli_stream_flag(mcdc_stream_cfg *cfg, int argc, char **argv, int *pi, int *prc) {
    static const char *const SNAPSHOT[] = {"full", "chunked"};
    static const char *const LOSS[] = {"fail", "resnapshot"};
    int i = *pi, rc = EXIT_OK, k;
    const char *a = argv[i];
    const char *v = NULL;
    if (strcmp(a, "--facts-table") == 0) { NEEDV(); cfg->facts_table = v; }
    else if (strcmp(a, "--control-table") == 0) { NEEDV(); cfg->control_table = v; }
    else if (strcmp(a, "--warehouse") == 0) { NEEDV(); cfg->warehouse = v; }
    else if (strcmp(a, "--verbose") == 0) cfg->log_level = MCDC_LOG_INFO;
    else if (strcmp(a, "--bootstrap") == 0) cfg->bootstrap = true;
    else if (strcmp(a, "--snapshot-on-switch") == 0) cfg->snapshot_on_switch = true;
    else if (strcmp(a, "--granularity") == 0) {
        NEEDV();
        mcdc_error e = MCDC_ERROR_INIT;
        if (mcdc_granularity_parse(v, &cfg->granularity, &e)) rc = cli_fail(&e);
    } else if (strcmp(a, "--trigger") == 0) {
        NEEDV();
        if (cli_parse_trigger(v, &cfg->trigger, &cfg->processing_time_ms))
            rc = cli_usage_error("--trigger: expected default, availableNow, once or "
                                 "processingTime=<n>[ms|s|m] between 1 ms and 7 days, not '%s'",
                                 v);
    } else if (strcmp(a, "--max-batches") == 0) {
        NEEDV();
        rc = cli_parse_int(a, v, 1, CLI_COUNT_MAX, &cfg->max_batches);
    } else if (strcmp(a, "--snapshot") == 0) {
        NEEDV();
        if ((k = pick(v, SNAPSHOT, 2)) < 0)
            rc = cli_usage_error("--snapshot: expected full or chunked, not '%s'", v);
        else
            cfg->snapshot = k ? MCDC_SNAPSHOT_CHUNKED : MCDC_SNAPSHOT_FULL;
    } else if (strcmp(a, "--on-data-loss") == 0) {
        NEEDV();
        if ((k = pick(v, LOSS, 2)) < 0)
            rc = cli_usage_error("--on-data-loss: expected fail or resnapshot, not '%s'", v);
        else
            cfg->on_data_loss = k ? MCDC_ON_DATA_LOSS_RESNAPSHOT : MCDC_ON_DATA_LOSS_FAIL;
    } else if (strcmp(a, "--resnapshot-interval-days") == 0) {
        NEEDV();
        /* ten years: CDC keeps changes 100 years at most, and a stream
         * that loses them more than once a decade needs no interval */
        rc = cli_parse_number(a, v, 0, 3650, &cfg->resnapshot_interval_days);
    } else
        return 0;
out:
    *pi = i;
    *prc = rc;
    return 1;
}

void cli_batch_report(void *vctx, const mcdc_batch_report *r) {
    const cli_batch_out *p = vctx;
    char end_ts[64] = "", verdict[64] = "";
    if (r->has_end_commit) cli_format_ts(r->end_commit_us, end_ts);
    if (r->has_verdict) cli_format_ts(r->finalized_until_us, verdict);
    if (p->json) {
        printf("{\"query\":\"%s\",\"batch_id\":%lld,\"rows\":%lld,\"inserts\":%lld,"
               "\"updates\":%lld,\"deletes\":%lld,\"start_lsn\":\"%s\",\"end_lsn\":\"%s\","
               "\"end_commit_ts\":\"%s\",\"duration_ms\":%.1f,\"rows_per_s\":%.0f,"
               "\"replayed\":%s,\"bronze_skipped\":%s,\"finalized_until\":%s%s%s}\n",
               p->name, (long long)r->batch_id, (long long)r->rows, (long long)r->inserts,
               (long long)r->updates, (long long)r->deletes, r->start_lsn, r->end_lsn, end_ts,
               r->duration_ms, r->rows_per_s, r->replayed ? "true" : "false",
               r->bronze_skipped ? "true" : "false", r->has_verdict ? "\"" : "",
               r->has_verdict ? verdict : "null", r->has_verdict ? "\"" : "");
        fflush(stdout);
        return;
    }
    if (p->quiet) return;
    /* one write per line: the streams of start-many print from their threads */
    char line[1024];
    size_t n = 0;
#define ADD(...) \
    n += (size_t)snprintf(line + n, n < sizeof line ? sizeof line - n : 0, __VA_ARGS__)
    ADD("%s: batch %lld: %lld rows (+%lld ~%lld -%lld) in %.0f ms, %.0f rows/s, end %s", p->name,
        (long long)r->batch_id, (long long)r->rows, (long long)r->inserts, (long long)r->updates,
        (long long)r->deletes, r->duration_ms, r->rows_per_s, r->end_lsn);
    if (*end_ts) ADD(" @ %s", end_ts);
    if (r->ingestion_lag_seconds >= 0) ADD(", lag %.1f s", r->ingestion_lag_seconds);
    if (r->has_verdict) ADD(", finalized_until %s", verdict);
    if (r->replayed) ADD(" (replayed%s)", r->bronze_skipped ? ", bronze already had it" : "");
#undef ADD
    fprintf(stderr, "%.*s\n", (int)(n < sizeof line ? n : sizeof line - 1), line);
}
