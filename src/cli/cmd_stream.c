/*
 * cmd_stream.c - mssql-cdc stream: one capture instance into bronze, with
 * the facts and the verdict (the reference's stream(...).to_delta(...)).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"

static const char STREAM_HELP[] =
    "usage: mssql-cdc stream [source options] --target T --app-id A --checkpoint DIR [...]\n"
    "\n"
    "Streams the changes of one capture instance into a bronze Delta table, exactly\n"
    "once, writing a facts row per micro-batch and advancing finalized_until. A newer\n"
    "capture instance of the same table is followed from its start LSN S (the older\n"
    "one read before S), and DDL on the table is classified before a batch is read\n"
    "(schema_change and capture_instance_switched facts rows; docs/schema-changes.md).\n"
    "\n"
    "Sink (the reference's to_delta parameters):\n"
    "  --target T           bronze table: a path (./bronze), or schema.table under --warehouse\n"
    "  --app-id A           Delta txnAppId; stable for the life of the checkpoint\n"
    "  --checkpoint DIR     checkpoint directory (a new one needs a new app id); its first\n"
    "                       run commits batch 0 even when nothing is new (rows 0, as the\n"
    "                       reference's), and one process runs on it at a time\n"
    "  --facts-table F      facts table (one row per batch); optional\n"
    "  --control-table C    control table whose finalized_until for T is advanced\n"
    "                       after each committed batch; optional\n"
    "  --granularity G      hour (default), minute or day\n"
    "  --warehouse W        directory holding schema.table names (default ./warehouse)\n"
    "  --trigger T          default (back to back), availableNow, once,\n"
    "                       or processingTime=<n>[ms|s|m] (e.g. processingTime=250ms)\n"
    "  --query-name N       name in progress output (default: the app id)\n"
    "  --max-batches N      stop after N batches\n"
    "  --bootstrap          on a new checkpoint, snapshot the table into T first (unless T\n"
    "                       holds a snapshot of it already), then stream from its LSN;\n"
    "                       with a facts table, snapshot_open and bootstrap rows record it\n"
    "  --snapshot MODE      how --bootstrap and a re-snapshot take one: full (default), the\n"
    "                       whole table read before the stream goes on; chunked (needs a\n"
    "                       facts table): only opened at an LSN S, the stream starts at S\n"
    "                       at once and 'mssql-cdc backfill' reads the table next to it\n"
    "  --snapshot-on-switch after the batch that first reads a newer capture instance (its\n"
    "                       capture_instance_switched row), snapshot the table so that rows\n"
    "                       unchanged since carry the columns only the newer instance\n"
    "                       captures (needs a facts table); full: the whole table read into\n"
    "                       T at once (snapshot_open with switch_batch_id, then a bootstrap\n"
    "                       row); chunked: one opened at the newer instance's start LSN for\n"
    "                       'mssql-cdc backfill', superseding a chunked one still open. A\n"
    "                       run stopped before it is taken takes it on restart, once\n"
    "  --on-data-loss P     fail (default): purged changes stop the stream (exit 3);\n"
    "                       resnapshot (needs a facts table): re-snapshot the table into a\n"
    "                       new generation (checkpoint DIR/_generations/<n>, app id A.g<n>,\n"
    "                       state in DIR/_mssql_cdc_generation.json), then stream on\n"
    "  --resnapshot-interval-days D\n"
    "                       a second loss within D days (default 7) of the last re-snapshot\n"
    "                       stops with exit 3 instead of snapshotting again; make D exceed\n"
    "                       the CDC retention\n"
    CLI_PROGRESS_HELP
    "                       of each whole snapshot the stream takes (--bootstrap, a\n"
    "                       re-snapshot, --snapshot-on-switch full); with --quiet, auto\n"
    "                       is none\n"
    "  --verbose            what the stream read and decided (snapshots, capture\n"
    "                       instances, DDL), besides the line per batch\n"
    "\n";
static const char STREAM_HELP_STORAGE[] =
    "Object stores (T, the facts and control tables and DIR on s3://, abfss://...):\n"
    CLI_STORAGE_HELP
    "\n";
static const char STREAM_HELP_SOURCE[] =
    "Source options (reference names, any case), as --<name> VALUE, -o name=value,\n"
    "or name = value lines in --options-file FILE:\n"
    "  captureInstance      capture instance to read (required); a newer instance of its\n"
    "                       table is followed, and the newest one once this one is gone\n"
    "  connectionString     Server=host,port;Database=..;UID=..;PWD=..;Encrypt=.. (required)\n"
    "  startingLsn          earliest (default), latest, or an LSN already processed (a new\n"
    "                       checkpoint's past max_lsn is refused, exit 2; before the\n"
    "                       instance's min_lsn, exit 3)\n"
    "  maxCommitsPerBatch   at most this many commits per micro-batch (default: no cap)\n"
    "  numPartitions        auto (= cores) or N: ranges read in parallel, a connection each\n"
    "  failOnDataLoss       true (default): stop on purged changes; false: skip and record\n"
    "  sourceTimeZone       auto (default), UTC, or the server's Windows zone name\n"
    "  includeCommandId     true (default); false for change tables without __$command_id\n"
    "  arrowBatchSize       rows per batch (default 10000)\n"
    "  columns              a subset of captured columns with types, Spark DDL style\n"
    "  schemaChangePolicy   classify (default): only a type change the stream's type\n"
    "                       cannot hold stops it (exit 4); fail: any DDL in a batch does\n"
    "  connectTimeout       login timeout in seconds (default 30)\n"
    "  queryTimeout         seconds without a reply before a read is retried (default 300)\n"
    "  backend              auto (default: our TDS client with Encrypt=no, FreeTDS\n"
    "                       otherwise), native or freetds\n"
    "  snapshotKeys, snapshotLsn, isolationLevel, lockTimeoutMs: the bootstrap\n"
    "                       snapshot's (see 'mssql-cdc snapshot --help'); without\n"
    "                       --bootstrap a warning says they have no effect\n"
    "  captureWaitSeconds   how long a snapshot waits for capture to record a new\n"
    "                       capture instance's start LSN (default 600; then exit 22)\n"
    "  overlapBatches       auto (default: on when the target is on an object store),\n"
    "                       true or false: read the next batch while the one before is\n"
    "                       uploaded and committed (exactly once all the same)\n"
    "  Accepted for the reference's option files, without effect in this release (a\n"
    "  warning says so): metricsPath (metrics travel in-process), snapshotChunks.\n"
    "  Unknown names are warned about and ignored. The connection string's password\n"
    "  never appears in output. Every command overwrites a connection string and a\n"
    "  secret --storage-option's value with x's in its own command line (what ps\n"
    "  shows) as it starts; until then others can read them, so prefer\n"
    "  --options-file (mode 0600) to a flag.\n"
    "\n"
    "Output: a progress line per batch on stderr; --json prints one JSON object per\n"
    "batch on stdout instead; --quiet prints errors only.\n"
    "SIGINT/SIGTERM finish the current batch and stop cleanly (exit 0).\n"
    "\n"
    "Exit codes: 0 done, 1 error, 2 bad usage or options, 3 data loss (DataLossError),\n"
    "4 schema changed (SchemaChangedError: a type the stream cannot hold, or a newer\n"
    "instance with new columns: restart, it goes on from S), 5 permission\n"
    "(PermissionError, with the GRANT), 6 source unreachable after retries. State on\n"
    "disk that cannot be trusted stops the stream before it writes: 7 state of another\n"
    "job (a checkpoint bound to other arguments, a table of another kind or in two\n"
    "roles, a new checkpoint on a target holding its changes), 8 target behind its\n"
    "checkpoint, 9 checkpoint rewound (a table holds batches it has not committed),\n"
    "11 facts behind the checkpoint, 12 another writer uses the app id, or another\n"
    "process is running on the checkpoint (one at a time: a run holds\n"
    "DIR/_mssql_cdc_lock, which a killed process does not keep), 13 the server\n"
    "refused the login.\n";

int cmd_stream(int argc, char **argv) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_opts *opts;
    if (mcdc_opts_create(&opts, &e)) return cli_fail(&e);
    mcdc_stream_cfg cfg = MCDC_STREAM_CFG_INIT;
    cli_batch_out pc = {0, 0, NULL};
    cli_progress_mode mode = CLI_PROGRESS_AUTO;
    cli_progress prog;
    int rc = EXIT_OK;
    for (int i = 0; i < argc && rc == EXIT_OK; i++) {
        const char *a = argv[i];
        const char *v = NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(STREAM_HELP, stdout);
            fputs(STREAM_HELP_STORAGE, stdout);
            fputs(STREAM_HELP_SOURCE, stdout);
            goto out;
        } else if (strcmp(a, "--target") == 0) { NEEDV(); cfg.target = v; }
        else if (strcmp(a, "--app-id") == 0) { NEEDV(); cfg.app_id = v; }
        else if (strcmp(a, "--checkpoint") == 0) { NEEDV(); cfg.checkpoint = v; }
        else if (strcmp(a, "--query-name") == 0) { NEEDV(); cfg.query_name = v; }
        else if (strcmp(a, "--quiet") == 0) pc.quiet = 1;
        else if (cli_progress_option(argc, argv, &i, &mode, &rc)) {
            if (rc) goto out;
        }
        else if (strcmp(a, "--json") == 0) pc.json = 1;
        else if (cli_stream_flag(&cfg, argc, argv, &i, &rc)) {
            if (rc) goto out;
        } else if (cli_source_option(opts, argc, argv, &i, &rc)) {
            if (rc) goto out;
        } else {
            rc = cli_usage_error("stream: unknown argument '%s'", a);
            goto out;
        }
    }
    if (cfg.target == NULL || cfg.app_id == NULL || cfg.checkpoint == NULL) {
        rc = cli_usage_error("stream needs %s", "--target, --app-id and --checkpoint");
        goto out;
    }
    if (mcdc_opts_check_required(opts, &e)) { rc = cli_fail(&e); goto out; }
    pc.name = cfg.query_name ? cfg.query_name : cfg.app_id;
    if ((rc = cli_source_env(opts, argc, argv)) != EXIT_OK) goto out;
    mcdc_stream *stream = NULL;
    if (pc.quiet && mode == CLI_PROGRESS_AUTO) mode = CLI_PROGRESS_NONE;
    rc = cli_progress_start(&prog, mode, &cfg.progress_fn, &cfg.progress_user, &cfg.log_fn,
                            &cfg.log_user);
    if (rc != EXIT_OK) goto out;
    cli_stop_signals_begin();
    int st = mcdc_stream_create(&stream, opts, &cfg, &e);
    if (st == MCDC_OK) {
        cli_stop_signals_job(cli_stop_stream, stream);
        st = mcdc_stream_run(stream, cli_batch_report, &pc, &e);
    }
    cli_stop_signals_end();
    mcdc_stream_free(stream);
    cli_progress_end(&prog);
    rc = st ? cli_fail(&e) : EXIT_OK;
out:
    mcdc_opts_free(opts);
    return rc;
}
