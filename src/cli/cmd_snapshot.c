/* cmd_snapshot.c - mssql-cdc snapshot: the reference's snapshot(). */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char SNAPSHOT_HELP[] =
    "usage: mssql-cdc snapshot [source options] --target T [--resnapshot] [...]\n"
    "\n"
    "Appends the current rows of the capture instance's table to the bronze table T as\n"
    "operation 0, in one commit, stamped with an LSN recorded before the read, and prints\n"
    "that offset as JSON on stdout: {\"lsn\": \"0x...\", \"commit_ts\": \"...\"}. A stream\n"
    "started with startingLsn at that LSN misses and doubles nothing (the newest image\n"
    "per key absorbs the overlap). Once T holds a snapshot of any capture instance of\n"
    "the table, its offset is printed and nothing is read.\n"
    "\n"
    "  --target T           bronze table: a path (./bronze), or schema.table under --warehouse\n"
    "  --resnapshot         take a new snapshot even when T holds one (after data loss;\n"
    "                       then stream with a new checkpoint and app id from it)\n"
    "  --app-id A, --facts-table F\n"
    "                       the stream's: a chunked snapshot of it still open in T is\n"
    "                       refused (exit 18), as one snapshot mode holds while one is open\n"
    "  --warehouse W        directory holding schema.table names (default ./warehouse)\n"
    CLI_STORAGE_HELP
    CLI_PROGRESS_HELP
    "                       (phases: reading, its rows of the server's estimate\n"
    "                       (sp_spaceused) and its key ranges; committing)\n"
    "  --verbose            what the snapshot read, and how\n"
    "\n"
    "Source options as for stream (captureInstance, connectionString, ...), and:\n"
    "  numPartitions        key ranges read at once, a connection each (one integer key\n"
    "                       in equal ranges of [MIN, MAX]; other keys in ranges of about\n"
    "                       as many rows; no usable key: one range)\n"
    "  snapshotKeys         JSON list of the columns to cut on (default: the capture\n"
    "                       instance's unique index); need not be unique\n"
    "  snapshotLsn          the LSN to stamp (recorded before the read; one past max_lsn\n"
    "                       is refused, exit 2, one before the instance's min_lsn exit 3)\n"
    "  isolationLevel       readCommitted (default) or snapshot (needs\n"
    "                       ALLOW_SNAPSHOT_ISOLATION); never NOLOCK\n"
    "  lockTimeoutMs        SET LOCK_TIMEOUT for the reads of the table\n"
    "  captureWaitSeconds   how long to wait, right after sp_cdc_enable_table, for\n"
    "                       capture to record the instance's start LSN (default 600)\n"
    "\n"
    "The LSN is max_lsn, or just before the capture instance's start LSN when max_lsn\n"
    "is below it: a snapshot never stands below where the instance begins. Until\n"
    "capture has processed the enable, SQL Server has no start LSN; the snapshot waits\n"
    "for it, saying so on stderr every few seconds. A snapshot of an empty table\n"
    "writes no row, and a rerun, a seed and a bootstrap find it all the same.\n"
    "\n"
    "SIGINT/SIGTERM stop it before it commits its rows (exit 1, stopped on request; rerun it).\n"
    "\n"
    "Exit codes as for stream: 0 done, 2 bad usage or options, 3 data loss (cleanup\n"
    "passed the snapshot's LSN while it was read), 7 T is not a bronze table or holds\n"
    "another table's rows, or T and F are one, 18 a\n"
    "chunked snapshot of the stream is open, 22 capture has not recorded the instance's\n"
    "start LSN within captureWaitSeconds (check the capture job; nothing was written).\n";

int cmd_snapshot(int argc, char **argv) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_opts *opts;
    if (mcdc_opts_create(&opts, &e)) return cli_fail(&e);
    mcdc_snapshot_cfg cfg = MCDC_SNAPSHOT_CFG_INIT;
    cli_progress_mode mode = CLI_PROGRESS_AUTO;
    cli_progress prog;
    int rc = EXIT_OK;
    for (int i = 0; i < argc && rc == EXIT_OK; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(SNAPSHOT_HELP, stdout);
            goto out;
        } else if (strcmp(a, "--target") == 0 || strcmp(a, "--warehouse") == 0 ||
                   strcmp(a, "--app-id") == 0 || strcmp(a, "--facts-table") == 0) {
            const char *v = cli_value(argc, argv, &i);
            if (v == NULL) {
                rc = cli_usage_error("%s needs a value", a);
                goto out;
            }
            if (a[2] == 't') cfg.target = v;
            else if (a[2] == 'w') cfg.warehouse = v;
            else if (a[2] == 'a') cfg.app_id = v;
            else cfg.facts_table = v;
        } else if (strcmp(a, "--resnapshot") == 0) {
            cfg.resnapshot = true;
        } else if (cli_job_option(opts, argc, argv, &i, &mode, &cfg.log_level, &rc)) {
            if (rc) goto out;
        } else {
            rc = cli_usage_error("snapshot: unknown argument '%s'", a);
            goto out;
        }
    }
    if (cfg.target == NULL) {
        rc = cli_usage_error("snapshot needs %s", "--target");
        goto out;
    }
    if ((rc = cli_source_env(opts, argc, argv)) != EXIT_OK) goto out;
    mcdc_offset off;
    int64_t rows = 0;
    bool taken = false;
    rc = cli_progress_start(&prog, mode, &cfg.progress_fn, &cfg.progress_user, &cfg.log_fn,
                            &cfg.log_user);
    if (rc != EXIT_OK) goto out;
    mcdc_stop *stop = NULL;
    int st = mcdc_stop_create(&stop, &e);
    if (st == MCDC_OK) {
        cfg.stop = stop;
        cli_stop_signals_begin();
        cli_stop_signals_job(cli_stop_request, stop);
        st = mcdc_snapshot_take(&off, &rows, &taken, opts, &cfg, &e);
        cli_stop_signals_end();
    }
    mcdc_stop_free(stop);
    cli_progress_end(&prog);
    if (st) {
        rc = cli_fail(&e);
        goto out;
    }
    cli_print_offset(&off);
    fprintf(stderr, "mssql-cdc: %s: %s\n", cfg.target,
            taken ? "snapshot taken" : "holds a snapshot already: nothing read");
    if (taken) fprintf(stderr, "mssql-cdc: %lld rows at %s\n", (long long)rows, off.lsn);
out:
    mcdc_opts_free(opts);
    return rc;
}
