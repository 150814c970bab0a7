/* cmd_backfill.c - mssql-cdc backfill: the reference's backfill(). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char BACKFILL_HELP[] =
    "usage: mssql-cdc backfill [source options] --target T --app-id A --facts-table F [...]\n"
    "\n"
    "Reads the newest chunked snapshot the stream A opened in T (stream --bootstrap\n"
    "--snapshot chunked, or a chunked re-snapshot) in waves of chunks next to the\n"
    "running stream, and prints how far it got as JSON on stdout, the reference's\n"
    "BackfillStatus: {\"snapshot\", \"chunks_done\", \"chunks_total\", \"done\", \"paused\",\n"
    "\"state\", \"reason\"}. Run it apart from the stream, again until it exits 0.\n"
    "\n"
    "The first run plans every chunk (one integer key from row counts per slice of its\n"
    "range, packed into chunks of at most --chunk-rows rows whatever the skew; other\n"
    "keys --chunk-rows keys at a time) into T's plans table, T_snapshot_plans, then a\n"
    "snapshot_plan facts row; the plan never changes while the snapshot is open. Each\n"
    "wave is stamped with max_lsn before it is read, appended to T in one commit\n"
    "(operation 0, _snapshot S, _chunk), then recorded in the plans table and as one\n"
    "snapshot_chunk facts row per chunk. After the last chunk comes the snapshot's\n"
    "bootstrap (or resnapshot) row: downstream rebuilds from S. Killed at any point,\n"
    "the next run reads no chunk twice into T and skips none.\n"
    "\n"
    "  --target T           bronze, as given to the stream\n"
    "  --app-id A           the stream's app id (its generations' snapshots too)\n"
    "  --facts-table F      the stream's facts table\n"
    "  --warehouse W        directory holding schema.table names (default ./warehouse)\n"
    CLI_STORAGE_HELP
    "  --chunk-rows N       rows a chunk holds at most, about (default 1000000); a\n"
    "                       later run's other value is ignored with a warning\n"
    "  --max-waves N        stop after N waves\n"
    "  --max-seconds S      stop starting waves after S seconds\n"
    "  --target-wave-seconds S\n"
    "                       size a wave to about S seconds at the last wave's pace\n"
    "                       (default 300; 0: one round of numPartitions chunks)\n"
    "  --min-headroom-hours H\n"
    "                       pause while the stream's retention headroom (its newest\n"
    "                       facts row's, less that row's age) is below H\n"
    "  --isolation L        snapshot or readCommitted (default: the isolationLevel\n"
    "                       option, else readCommitted); plans and reads alike\n"
    CLI_PROGRESS_HELP
    "                       (phases: planning; reading, a wave's rows and chunks, and\n"
    "                       the snapshot's chunks done of its plan's)\n"
    "  --verbose            what each run planned and read, wave by wave\n"
    "\n"
    "Source options as for stream (captureInstance, connectionString, ...);\n"
    "numPartitions chunks are read at once, a connection each; snapshotKeys must be\n"
    "what the snapshot was opened with.\n"
    "SIGINT/SIGTERM finish the current wave and stop (state running).\n"
    "\n"
    "Exit codes: 0 done, 14 running (call again), 15 waiting_headroom, 16\n"
    "waiting_metrics (the stream wrote no facts row with a headroom), 17 no_snapshot\n"
    "(none opened by A in T yet, or wrong arguments), 18 a full snapshot of the stream\n"
    "is still open; errors as for stream (2 bad usage, 7 a table of another kind, or\n"
    "options of another table than T's rows, 12\n"
    "another backfill of the same snapshot planned a wave first, ...).\n";

/* Seconds a flag may say: a year (more is a typo). Hours of headroom: the
 * most retention CDC keeps, 52,494,800 minutes. */
#define BACKFILL_SECONDS_MAX 31536000.0
#define BACKFILL_HEADROOM_HOURS_MAX 874914.0

int cli_backfill_exit(mcdc_backfill_state s) {
    switch (s) {
    case MCDC_BACKFILL_DONE: return EXIT_OK;
    case MCDC_BACKFILL_RUNNING: return EXIT_BACKFILL_RUNNING;
    case MCDC_BACKFILL_WAITING_HEADROOM: return EXIT_BACKFILL_WAITING_HEADROOM;
    case MCDC_BACKFILL_WAITING_METRICS: return EXIT_BACKFILL_WAITING_METRICS;
    case MCDC_BACKFILL_NO_SNAPSHOT: return EXIT_BACKFILL_NO_SNAPSHOT;
    }
    return EXIT_ERROR;
}

int cmd_backfill(int argc, char **argv) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_opts *opts;
    if (mcdc_opts_create(&opts, &e)) return cli_fail(&e);
    mcdc_backfill_cfg cfg = MCDC_BACKFILL_CFG_INIT;
    cli_progress_mode mode = CLI_PROGRESS_AUTO;
    cli_progress prog;
    int rc = EXIT_OK;
    for (int i = 0; i < argc && rc == EXIT_OK; i++) {
        const char *a = argv[i], *v = NULL;
        double d;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(BACKFILL_HELP, stdout);
            goto out;
        } else if (strcmp(a, "--target") == 0) {
            NEEDV();
            cfg.target = v;
        } else if (strcmp(a, "--app-id") == 0) {
            NEEDV();
            cfg.app_id = v;
        } else if (strcmp(a, "--facts-table") == 0) {
            NEEDV();
            cfg.facts_table = v;
        } else if (strcmp(a, "--warehouse") == 0) {
            NEEDV();
            cfg.warehouse = v;
        } else if (strcmp(a, "--isolation") == 0) {
            NEEDV();
            cfg.isolation = v;
        } else if (strcmp(a, "--chunk-rows") == 0) {
            NEEDV();
            if ((rc = cli_parse_int(a, v, 1, CLI_COUNT_MAX, &cfg.chunk_rows)) != EXIT_OK) goto out;
        } else if (strcmp(a, "--max-waves") == 0) {
            NEEDV();
            if ((rc = cli_parse_int(a, v, 1, CLI_COUNT_MAX, &cfg.max_waves)) != EXIT_OK) goto out;
        } else if (strcmp(a, "--max-seconds") == 0) {
            NEEDV();
            if ((rc = cli_parse_number(a, v, 0, BACKFILL_SECONDS_MAX, &d)) != EXIT_OK) goto out;
            if (d == 0) {
                rc = cli_usage_error("%s must be more than 0", a);
                goto out;
            }
            cfg.max_seconds = d;
        } else if (strcmp(a, "--target-wave-seconds") == 0) {
            NEEDV();
            if ((rc = cli_parse_number(a, v, 0, BACKFILL_SECONDS_MAX, &d)) != EXIT_OK) goto out;
            cfg.target_wave_seconds = d;
        } else if (strcmp(a, "--min-headroom-hours") == 0) {
            NEEDV();
            if ((rc = cli_parse_number(a, v, 0, BACKFILL_HEADROOM_HOURS_MAX,
                                       &cfg.min_headroom_hours)) != EXIT_OK)
                goto out;
            cfg.has_min_headroom = true;
        } else if (cli_job_option(opts, argc, argv, &i, &mode, &cfg.log_level, &rc)) {
            if (rc) goto out;
        } else {
            rc = cli_usage_error("backfill: unknown argument '%s'", a);
            goto out;
        }
    }
    if (cfg.target == NULL || cfg.app_id == NULL || cfg.facts_table == NULL) {
        rc = cli_usage_error("backfill needs %s", "--target, --app-id and --facts-table");
        goto out;
    }
    if ((rc = cli_source_env(opts, argc, argv)) != EXIT_OK) goto out;
    mcdc_backfill *b = NULL;
    mcdc_backfill_status st = {.size = sizeof st};
    rc = cli_progress_start(&prog, mode, &cfg.progress_fn, &cfg.progress_user, &cfg.log_fn,
                            &cfg.log_user);
    if (rc != EXIT_OK) goto out;
    cli_stop_signals_begin();
    int r = mcdc_backfill_create(&b, opts, &cfg, &e);
    if (r == MCDC_OK) {
        cli_stop_signals_job(cli_stop_backfill, b);
        r = mcdc_backfill_run(b, &st, &e);
    }
    cli_stop_signals_end();
    mcdc_backfill_free(b);
    cli_progress_end(&prog);
    if (r) {
        rc = cli_fail(&e);
        goto out;
    }
    char json[MCDC_BACKFILL_STATUS_JSON_SIZE];
    if (mcdc_backfill_status_json(json, sizeof json, &st, &e)) {
        rc = cli_fail(&e);
        goto out;
    }
    printf("%s\n", json);
    rc = cli_backfill_exit(st.state);
out:
    mcdc_opts_free(opts);
    return rc;
}
