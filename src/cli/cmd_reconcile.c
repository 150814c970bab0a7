/* cmd_reconcile.c - mssql-cdc reconcile: is silver equal to its SQL Server
 * table? (the reference's reconcile). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char RECONCILE_HELP[] =
    "usage: mssql-cdc reconcile --silver T --bronze B --control-table C\n"
    "                           source options [--repair --facts-table F] [...]\n"
    "\n"
    "Compares silver T (built by mssql-cdc apply) with the SQL Server table the\n"
    "capture instance tracks, and prints the reference's ReconcileResult as JSON on\n"
    "stdout: {\"run_id\", \"silver_version\", \"silver_lsn\", \"source_lsn\", \"buckets\",\n"
    "\"match\", \"in_flight\", \"mismatch\", \"hashed\", \"failures\"}, then ours (rows each\n"
    "side, rows hashed, report rows, differs, verified: false when nothing could be,\n"
    "rechecks). Nothing is written to SQL Server and nothing is read with NOLOCK.\n"
    "\n"
    "Tier 1: with one integer or date key, one scan on SQL Server counts the rows\n"
    "and sums the keys (COUNT_BIG, SUM as decimal(38,0), a date as its day number)\n"
    "per bucket of about --bucket-rows rows, and the same over T pinned at one\n"
    "version: MATCH when equal; IN_FLIGHT when they differ while a change to the\n"
    "bucket is newer than what one side read (check again later); else MISMATCH.\n"
    "Any other key gets one count of the whole table.\n"
    "Tier 2: every MISMATCH bucket and a --sample of the MATCH ones (other keys:\n"
    "sampled ranges) are read through the snapshot reader and joined with T on the\n"
    "key by one row hash of the captured columns (not computed ones): the keys that\n"
    "differ are MISSING_TARGET (only in the source), MISSING_SOURCE (only in T),\n"
    "RECORD_DIFF (other values; detail names the columns) or IN_FLIGHT (a change to\n"
    "the key after the older of T's applied_lsn and max_lsn read before the source\n"
    "is in B, or still only in a change table: after a capture instance switch the\n"
    "older or the newer one, as the stream reads them; or, with --facts-table, a\n"
    "repair of the key is in B that apply has not taken: detail.repair_pending);\n"
    "DUPLICATE_TARGET: a key T holds more than once (another writer appended it;\n"
    "detail.silver_rows). A key the source holds twice is refused (exit 21).\n"
    "With --facts-table, B's newest chunked snapshot is checked against its facts:\n"
    "CHUNK_TILING, CHUNK_ROWS, CHUNK_STAMP.\n"
    "Before anything is read, the options must name the capture instance B was\n"
    "streamed from (or another of its table): else exit 7.\n"
    "\n";

static const char RECONCILE_HELP_OPTIONS[] =
    "  --silver T           silver: a path (./silver), or schema.table under --warehouse\n"
    "  --bronze B           the table T is applied from\n"
    "  --control-table C    apply's: T's applied_lsn\n"
    "  --facts-table F      the stream's: check B's newest chunked snapshot, and\n"
    "                       find the repairs apply has not taken\n"
    "  --report-table R     append the run's report rows to R (the reference's\n"
    "                       columns), in one commit\n"
    "  --keys K             the key columns, as a JSON list or comma-separated;\n"
    "                       default: the capture instance's unique index. A key the\n"
    "                       source holds twice is refused (exit 21), naming it\n"
    "  --bucket-rows N      rows per bucket (default 1000000)\n"
    "  --sample X           fraction of the MATCH buckets also compared row by row,\n"
    "                       0 to 1 (default 0.01)\n"
    "  --sample-seed N      the seed of that sample (default: random)\n"
    "  --settle-seconds N   while buckets or keys are IN_FLIGHT, check them again\n"
    "                       (row by row, each time at T's latest version, as a new\n"
    "                       run would read) until none is or N seconds have passed\n"
    "                       after the first check (0 to 86400; default 0: once). A\n"
    "                       bucket settles when it is MATCH or MISMATCH and none of\n"
    "                       its keys is IN_FLIGHT; its report row is that check's\n"
    "  --repair             after the report, repair the keys that differ and are\n"
    "                       not in flight (as mssql-cdc repair does, under the\n"
    "                       run's run_id; needs --facts-table): the next apply\n"
    "                       fixes silver (until then they are IN_FLIGHT, and a\n"
    "                       second --repair appends nothing). The JSON gains\n"
    "                       \"repair\": {...} when a key was repaired. With\n"
    "                       --report-table, a run first completes the repair of a\n"
    "                       run killed after its report (under that run's id, its\n"
    "                       report's keys), then goes on: those keys are IN_FLIGHT\n"
    "  --warehouse W        directory holding schema.table names (default ./warehouse)\n"
    CLI_STORAGE_HELP
    "  --verbose            what the run read\n"
    CLI_PROGRESS_HELP
    "                       (phases: counting, Tier 1, silver's rows; comparing, Tier\n"
    "                       2, both sides' rows of the buckets hashed; settling, the\n"
    "                       buckets re-checked)\n"
    "\n"
    "Source options as for stream (captureInstance, connectionString, isolationLevel,\n"
    "lockTimeoutMs, ...). Tier 1 counts under READ COMMITTED; Tier 2 reads under\n"
    "isolationLevel. A gone captureInstance is found through bronze (docs/reconcile.md).\n"
    "\n";

static const char RECONCILE_HELP_EXIT[] =
    "SIGINT/SIGTERM stop it before it commits its rows (exit 1, stopped on request; rerun it).\n"
    "\n"
    "Exit codes: 0 nothing differs and something was verified (IN_FLIGHT alone is no\n"
    "difference: run again later); 19 something differs (a MISMATCH bucket,\n"
    "MISSING_TARGET, MISSING_SOURCE, RECORD_DIFF, DUPLICATE_TARGET or a CHUNK_*\n"
    "failure; the result is on stdout all the same; also with --repair when it\n"
    "repaired them: run apply, then reconcile again); 20 nothing could be verified\n"
    "(every bucket and key compared was IN_FLIGHT: run again later, or give\n"
    "--settle-seconds); 21 a --keys key the source holds twice; 2 bad usage, no key,\n"
    "or no silver; 4 no capture instance of the table is left; 7 a table of another\n"
    "kind, one table in two roles, or options of another capture instance than B's;\n"
    "others as for stream.\n";


int cmd_reconcile(int argc, char **argv) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_opts *opts;
    if (mcdc_opts_create(&opts, &e)) return cli_fail(&e);
    mcdc_reconcile_cfg cfg = MCDC_RECONCILE_CFG_INIT;
    char keybuf[4096];
    const char *keys[32];
    cli_progress_mode mode = CLI_PROGRESS_AUTO;
    cli_progress prog;
    int rc = EXIT_OK;
    for (int i = 0; i < argc && rc == EXIT_OK; i++) {
        const char *a = argv[i], *v = NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(RECONCILE_HELP, stdout);
            fputs(RECONCILE_HELP_OPTIONS, stdout);
            fputs(RECONCILE_HELP_EXIT, stdout);
            goto out;
        } else if (strcmp(a, "--silver") == 0) {
            NEEDV();
            cfg.silver = v;
        } else if (strcmp(a, "--bronze") == 0) {
            NEEDV();
            cfg.bronze = v;
        } else if (strcmp(a, "--control-table") == 0) {
            NEEDV();
            cfg.control_table = v;
        } else if (strcmp(a, "--facts-table") == 0) {
            NEEDV();
            cfg.facts_table = v;
        } else if (strcmp(a, "--report-table") == 0) {
            NEEDV();
            cfg.report_table = v;
        } else if (strcmp(a, "--warehouse") == 0) {
            NEEDV();
            cfg.warehouse = v;
        } else if (strcmp(a, "--keys") == 0) {
            NEEDV();
            if (cli_parse_keys(v, keybuf, sizeof keybuf, keys, &cfg.n_keys)) {
                rc = cli_usage_error("--keys: expected column names, as a JSON list or separated "
                                     "by commas, not '%s'",
                                     v);
                goto out;
            }
            cfg.keys = keys;
        } else if (strcmp(a, "--bucket-rows") == 0) {
            NEEDV();
            if ((rc = cli_parse_int(a, v, 1, CLI_COUNT_MAX, &cfg.bucket_rows)) != EXIT_OK) goto out;
        } else if (strcmp(a, "--sample") == 0) {
            NEEDV();
            if ((rc = cli_parse_number(a, v, 0, 1, &cfg.sample)) != EXIT_OK) goto out;
        } else if (strcmp(a, "--sample-seed") == 0) {
            NEEDV();
            int64_t s = 0;
            if ((rc = cli_parse_int(a, v, 0, INT64_MAX, &s)) != EXIT_OK) goto out;
            cfg.has_sample_seed = true;
            cfg.sample_seed = (uint64_t)s;
        } else if (strcmp(a, "--settle-seconds") == 0) {
            NEEDV();
            if ((rc = cli_parse_int(a, v, 0, 86400, &cfg.settle_seconds)) != EXIT_OK) goto out;
        } else if (strcmp(a, "--repair") == 0) {
            cfg.repair = true;
        } else if (cli_job_option(opts, argc, argv, &i, &mode, &cfg.log_level, &rc)) {
            if (rc) goto out;
        } else {
            rc = cli_usage_error("reconcile: unknown argument '%s'", a);
            goto out;
        }
    }
    if (cfg.silver == NULL || cfg.bronze == NULL || cfg.control_table == NULL) {
        rc = cli_usage_error("reconcile needs %s", "--silver, --bronze and --control-table");
        goto out;
    }
    if (cfg.repair && cfg.facts_table == NULL) {
        rc = cli_usage_error("reconcile --repair needs %s",
                             "--facts-table (the stream's: apply finds repairs there)");
        goto out;
    }
    if ((rc = cli_source_env(opts, argc, argv)) != EXIT_OK) goto out;
    mcdc_reconcile *r = NULL;
    mcdc_reconcile_result res = {.size = sizeof res};
    rc = cli_progress_start(&prog, mode, &cfg.progress_fn, &cfg.progress_user, &cfg.log_fn,
                            &cfg.log_user);
    if (rc != EXIT_OK) goto out;
    int st = mcdc_reconcile_create(&r, opts, &cfg, &e);
    if (st == MCDC_OK) {
        cli_stop_signals_begin();
        cli_stop_signals_job(cli_stop_reconcile, r);
        st = mcdc_reconcile_run(r, &res, &e);
        cli_stop_signals_end();
    }
    cli_progress_end(&prog);
    if (st) {
        mcdc_reconcile_free(r);
        rc = cli_fail(&e);
        goto out;
    }
    char json[MCDC_RECONCILE_RESULT_JSON_SIZE];
    if (mcdc_reconcile_result_json(json, sizeof json, &res, &e) == MCDC_OK) printf("%s\n", json);
    fflush(stdout);
    rc = mcdc_reconcile_differs(&res) ? EXIT_DIFFERS : res.verified ? EXIT_OK : EXIT_UNVERIFIED;
    mcdc_reconcile_free(r);
out:
    mcdc_opts_free(opts);
    return rc;
}
