/* cmd_apply.c - mssql-cdc apply: silver from bronze (the reference's apply_changes). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char APPLY_HELP[] =
    "usage: mssql-cdc apply --bronze B --target T --control-table C [--facts-table F]\n"
    "                       (--keys K | source options) [...]\n"
    "\n"
    "Keeps T (silver), the current state of the source table, one row per key, from\n"
    "the bronze change log B, and prints the reference's ApplyResult as JSON on\n"
    "stdout: {\"rebuilt\", \"applied_lsn\", \"finalized_until\", \"bronze_found\"}, then what\n"
    "the run did (passes, inserted, updated, deleted, silver_version, open_snapshot_lsn,\n"
    "snapshot_wave).\n"
    "\n"
    "Each pass ranks what B holds beyond T's position (applied_lsn in C): the latest\n"
    "row of each key by (_start_lsn, _command_id, _seqval, _operation); operation 1\n"
    "deletes the key, 0, 2 and 4 set it, 3 deletes its own key unless the 4 of the same\n"
    "change outranks it. Keys match null-safely; deleted rows are removed. A row only\n"
    "takes an image newer than its own _start_lsn, so applying again changes nothing.\n"
    "When B holds a complete snapshot newer than the one T was rebuilt from, T is\n"
    "rebuilt from it and the changes after it. A chunked snapshot still open is applied\n"
    "wave by wave (with one integer, date or timestamp key, the keys a chunk lacks are\n"
    "deleted) and holds T's verdict until it completes. T's columns are the captured\n"
    "ones, _start_lsn and _commit_ts; columns B gains are added. Only the files holding\n"
    "changed keys are rewritten, in one commit; then C gets applied_lsn, snapshot_lsn,\n"
    "open_snapshot_lsn and snapshot_wave, and T's finalized_until moves to B's verdict\n"
    "read before B. Killed at any point, the next run gives the same T.\n"
    "\n";
/* more strings: a C17 compiler need not take a longer literal */
static const char APPLY_HELP_MORE[] =
    "With --scd-type 2, T is a history instead (SCD type 2): a row per version of each\n"
    "key, with __START_AT and __END_AT (the commit times it began and ended at, UTC;\n"
    "__END_AT NULL on the open version) and _end_lsn. Each change of a key after the\n"
    "newest LSN its versions hold closes its open version and opens one (a\n"
    "transaction's changes of a key make one); a delete closes it; a snapshot row equal\n"
    "to it changes nothing; a change of no tracked column updates it in place. A rebuild\n"
    "closes the open versions of keys the newer snapshot lacks at its LSN. A chunked\n"
    "snapshot goes wave by wave: a chunk's rows count at its stamp L, and (one integer,\n"
    "date or timestamp key) the open versions of keys its range lacks are closed at L.\n"
    "T keeps the type it was created with (table property mssql_cdc.scd_type); another\n"
    "is refused.\n"
    "\n";
static const char APPLY_FLAGS[] =
    "  --bronze B           the stream's target, named as the stream was given it\n"
    "  --target T           silver: a path (./silver), or schema.table under --warehouse\n"
    "  --control-table C    the position and the verdicts (B's must be there too)\n"
    "  --facts-table F      the stream's facts table: needed for chunked snapshots and\n"
    "                       an emptied table's re-snapshot; without it T's verdict is\n"
    "                       never advanced\n"
    "  --keys K             the key columns, as a JSON list ([\"region\",\"id\"]) or comma-\n"
    "                       separated; default: the capture instance's unique index, read\n"
    "                       through the source options\n"
    "  --capture-instance CI  the stream's (default: the captureInstance option; another\n"
    "                       than that option is refused)\n"
    "  --granularity G      hour (default), minute or day\n"
    "  --scd-type N         1 (default): the current state; 2: a history of versions\n"
    "  --track-history-columns C  with --scd-type 2: only a change of these columns (a\n"
    "                       JSON list or comma-separated) opens a version; default: every\n"
    "                       captured column\n"
    "  --trigger T          once (default): one pass; availableNow: passes until B holds\n"
    "                       nothing new; processingTime=<n>[ms|s|m]: a pass at most that\n"
    "                       often, until stopped; default: passes back to back, polling an\n"
    "                       idle B every second. Long-running triggers print a JSON line per\n"
    "                       pass.\n"
    "  --max-passes N       stop after N passes (1 to 2147483647)\n"
    "  --memory-mb N        memory the changes are sorted in (1 to 1048576; default 64):\n"
    "                       they spill to runs in T's _mssql_cdc_spill/ (or --scratch-dir)\n"
    "                       before they would pass it (about their uncompressed size on\n"
    "                       disk: twice their Parquet size). Decoding B and the merge's\n"
    "                       buffers come on top (docs/silver.md, \"Bounded memory\")\n"
    "  --scratch-dir DIR    a local directory for the spilled runs (under its\n"
    "                       mssql-cdc-spill/, each run's own names, removed when merged):\n"
    "                       always used when T is on an object store (default there: the\n"
    "                       system's temp directory, $TMPDIR or /tmp); for a local T, when\n"
    "                       given (default: T's _mssql_cdc_spill/)\n"
    "  --file-rows N        rows a silver file holds, about (1 to 1073741824; default\n"
    "                       1048576)\n"
    "  --deletion-vectors   create T merged on read (delta.enableDeletionVectors): rows a\n"
    "                       pass replaces or deletes are marked in deletion vectors and\n"
    "                       the new images written as new files, instead of rewriting the\n"
    "                       files that hold them; an existing T follows its property\n"
    "                       (SCD type 1 only: refused with --scd-type 2)\n"
    "  --warehouse W        directory holding schema.table names (default ./warehouse)\n"
    CLI_STORAGE_HELP
    "  --verbose            what each pass read, ranked and merged, and how long it took\n"
    CLI_PROGRESS_HELP
    "                       (phases of each pass that reads rows: reading bronze, its\n"
    "                       rows by the files' statistics; sorting; merging, or\n"
    "                       rebuilding, silver's files done of its files)\n"
    "\n";
static const char APPLY_HELP_END[] =
    "Source options as for stream (captureInstance, connectionString, ...): with a\n"
    "connection string, the key comes from the unique index and the table's other\n"
    "capture instances (after a switch) are its too; a row of any other capture\n"
    "instance in B stops the run. A captureInstance that is gone (one B's rows name, or\n"
    "a table's default name) is followed through the instances B's rows name (exit 4\n"
    "when none of its table is left); an options' instance of another table than B's\n"
    "is refused (exit 7).\n"
    "SIGINT/SIGTERM finish the current pass and stop.\n"
    "\n"
    "The key must be unique: B holding two snapshot rows of one key at one LSN (the\n"
    "latest of the key), or two inserts of one key in one transaction, proves it is\n"
    "not, and the pass stops before it commits (exit 21, naming the key and a value).\n"
    "\n"
    "Exit codes: 0 applied (or B does not exist yet: bronze_found false); 2 bad usage,\n"
    "or no key; 4 a silver column's type differs from bronze's; 7 a table of another\n"
    "kind or SCD type, or one table in two roles; 12 another writer commits to T as\n"
    "apply; 21 the key is not unique (give the table's real unique key with --keys);\n"
    "others as for stream.\n";

/* ctx: the progress whose line a pass's JSON line must not follow (NULL:
 * none drawn). */
static void print_pass(void *ctx, const mcdc_apply_result *r) {
    if (ctx) cli_progress_clear(ctx);
    char json[MCDC_APPLY_RESULT_JSON_SIZE];
    mcdc_error e = MCDC_ERROR_INIT;
    if (mcdc_apply_result_json(json, sizeof json, r, &e) == MCDC_OK) {
        printf("%s\n", json);
        fflush(stdout);
    }
}

/* --memory-mb: the library takes up to 1 TiB (more is a typo). --file-rows:
 * a file also ends at 96 MB of batches, which 2^30 rows of any table pass. */
#define APPLY_MEMORY_MB_MAX (1024LL * 1024)
#define APPLY_FILE_ROWS_MAX (1LL << 30)

int cmd_apply(int argc, char **argv) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_opts *opts;
    if (mcdc_opts_create(&opts, &e)) return cli_fail(&e);
    mcdc_apply_cfg cfg = MCDC_APPLY_CFG_INIT;
    char keybuf[4096], trackbuf[4096];
    const char *keys[32], *track[32];
    cli_progress_mode mode = CLI_PROGRESS_AUTO;
    cli_progress prog;
    int rc = EXIT_OK;
    for (int i = 0; i < argc && rc == EXIT_OK; i++) {
        const char *a = argv[i], *v = NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(APPLY_HELP, stdout);
            fputs(APPLY_HELP_MORE, stdout);
            fputs(APPLY_FLAGS, stdout);
            fputs(APPLY_HELP_END, stdout);
            goto out;
        } else if (strcmp(a, "--bronze") == 0) {
            NEEDV();
            cfg.bronze = v;
        } else if (strcmp(a, "--target") == 0) {
            NEEDV();
            cfg.target = v;
        } else if (strcmp(a, "--control-table") == 0) {
            NEEDV();
            cfg.control_table = v;
        } else if (strcmp(a, "--facts-table") == 0) {
            NEEDV();
            cfg.facts_table = v;
        } else if (strcmp(a, "--warehouse") == 0) {
            NEEDV();
            cfg.warehouse = v;
        } else if (strcmp(a, "--capture-instance") == 0) {
            NEEDV();
            cfg.capture_instance = v;
        } else if (strcmp(a, "--keys") == 0) {
            NEEDV();
            if (cli_parse_keys(v, keybuf, sizeof keybuf, keys, &cfg.n_keys)) {
                rc = cli_usage_error("--keys: expected column names, as a JSON list or separated "
                                     "by commas, not '%s'",
                                     v);
                goto out;
            }
            cfg.keys = keys;
        } else if (strcmp(a, "--scd-type") == 0) {
            NEEDV();
            if (strcmp(v, "1") != 0 && strcmp(v, "2") != 0) {
                rc = cli_usage_error("--scd-type: expected 1 (the current state) or 2 (a history), "
                                     "not '%s'", v);
                goto out;
            }
            cfg.scd_type = v[0] - '0';
        } else if (strcmp(a, "--deletion-vectors") == 0) {
            cfg.deletion_vectors = 1;
        } else if (strcmp(a, "--track-history-columns") == 0) {
            NEEDV();
            if (cli_parse_keys(v, trackbuf, sizeof trackbuf, track, &cfg.n_track_history_columns)) {
                rc = cli_usage_error("--track-history-columns: expected at most 32 column names, as "
                                     "a JSON list or separated by commas, not '%s'", v);
                goto out;
            }
            cfg.track_history_columns = track;
        } else if (strcmp(a, "--granularity") == 0) {
            NEEDV();
            if (mcdc_granularity_parse(v, &cfg.granularity, &e)) {
                rc = cli_fail(&e);
                goto out;
            }
        } else if (strcmp(a, "--trigger") == 0) {
            NEEDV();
            if (cli_parse_trigger(v, &cfg.trigger, &cfg.processing_time_ms)) {
                rc = cli_usage_error("--trigger: expected once, availableNow, default or "
                                     "processingTime=<n>[ms|s|m], not '%s'",
                                     v);
                goto out;
            }
        } else if (strcmp(a, "--max-passes") == 0) {
            NEEDV();
            if ((rc = cli_parse_int(a, v, 1, CLI_COUNT_MAX, &cfg.max_passes)) != EXIT_OK) goto out;
        } else if (strcmp(a, "--memory-mb") == 0) {
            NEEDV();
            if ((rc = cli_parse_int(a, v, 1, APPLY_MEMORY_MB_MAX, &cfg.memory_mb)) != EXIT_OK)
                goto out;
        } else if (strcmp(a, "--scratch-dir") == 0) {
            NEEDV();
            if (*v == 0) {
                rc = cli_usage_error("--scratch-dir is empty%s: give a local directory, such as /tmp",
                                     "");
                goto out;
            }
            cfg.scratch_dir = v;
        } else if (strcmp(a, "--file-rows") == 0) {
            NEEDV();
            if ((rc = cli_parse_int(a, v, 1, APPLY_FILE_ROWS_MAX, &cfg.file_rows)) != EXIT_OK)
                goto out;
        } else if (cli_job_option(opts, argc, argv, &i, &mode, &cfg.log_level, &rc)) {
            if (rc) goto out;
        } else {
            rc = cli_usage_error("apply: unknown argument '%s'", a);
            goto out;
        }
    }
    if (cfg.track_history_columns && cfg.scd_type != 2) {
        rc = cli_usage_error("--track-history-columns %s", "needs --scd-type 2: type 1 keeps no versions");
        goto out;
    }
    if (cfg.bronze == NULL || cfg.target == NULL || cfg.control_table == NULL) {
        rc = cli_usage_error("apply needs %s", "--bronze, --target and --control-table");
        goto out;
    }
    if ((rc = cli_source_env(opts, argc, argv)) != EXIT_OK) goto out;
    /* the library reads no environment: the temp directory a silver on an
     * object store spills to, unless --scratch-dir says */
    const char *tmp = getenv("TMPDIR");
    if (cfg.scratch_dir == NULL && cli_location_remote(cfg.target, cfg.warehouse))
        cfg.scratch_dir = tmp && *tmp ? tmp : "/tmp";
    bool long_running = cfg.trigger == MCDC_TRIGGER_DEFAULT ||
                        cfg.trigger == MCDC_TRIGGER_PROCESSING_TIME;
    mcdc_apply *ap = NULL;
    mcdc_apply_result res = {.size = sizeof res};
    rc = cli_progress_start(&prog, mode, &cfg.progress_fn, &cfg.progress_user, &cfg.log_fn,
                            &cfg.log_user);
    if (rc != EXIT_OK) goto out;
    cli_stop_signals_begin();
    int r = mcdc_apply_create(&ap, opts, &cfg, &e);
    if (r == MCDC_OK) {
        cli_stop_signals_job(cli_stop_apply, ap);
        r = mcdc_apply_run(ap, long_running ? print_pass : NULL, &prog, &res, &e);
    }
    cli_stop_signals_end();
    mcdc_apply_free(ap);
    cli_progress_end(&prog);
    if (r) {
        rc = cli_fail(&e);
        goto out;
    }
    print_pass(NULL, &res);
    rc = EXIT_OK;
out:
    mcdc_opts_free(opts);
    return rc;
}
