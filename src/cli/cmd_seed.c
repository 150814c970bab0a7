/* cmd_seed.c - mssql-cdc seed: the reference's seed(). */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char SEED_HELP[] =
    "usage: mssql-cdc seed [source options] --target T --from COPY --as-of WHEN [...]\n"
    "\n"
    "Appends COPY, a copy of the capture instance's table that you already have, to the\n"
    "bronze table T as its snapshot, and prints the offset it is stamped with as JSON:\n"
    "{\"lsn\": \"0x...\", \"commit_ts\": \"...\"}. For a table too big to snapshot within\n"
    "CDC's retention; 'stream --bootstrap' then starts from it.\n"
    "\n"
    "  --target T               bronze table: a path (./bronze), or schema.table under\n"
    "                           --warehouse\n"
    "  --from COPY              a Delta table's directory, one .parquet file, a directory\n"
    "                           of .parquet files (names starting with _ or . skipped;\n"
    "                           subdirectories not read), or a glob of them in the file\n"
    "                           name (dir/part-*.parquet). A path holding none is an error\n"
    "  --as-of WHEN             when the copy started being read: a UTC time\n"
    "                           (2026-12-01T10:00:00Z; an offset is converted), or an LSN\n"
    "                           (0x...) recorded before it. Every commit at or before it\n"
    "                           must be in the copy; later ones may be (the stream replays\n"
    "                           them). A time maps to the last commit at or before it, to\n"
    "                           the second, on the server's clock\n"
    "  --allow-missing-columns  captured columns COPY lacks read NULL (else an error)\n"
    "  --allow-empty            seed a copy without rows (else an error: an empty copy of\n"
    "                           a table that has rows is the usual mistake)\n"
    "  --reseed                 replace the target's snapshot with a newer copy (after a\n"
    "                           DataLossError; then stream with a new checkpoint and app id)\n"
    "  --app-id A --facts-table F\n"
    "                           the stream's: a bootstrap row records the seed, and a\n"
    "                           snapshot of that stream still open is refused\n"
    "  --warehouse W            directory holding schema.table names (default ./warehouse)\n"
    CLI_STORAGE_HELP
    "  --verbose                say what was checked (the key, or that there is none)\n"
    CLI_PROGRESS_HELP
    "                       (phases: checking keys, reading, each of the copy's rows\n"
    "                       by its Parquet or Delta metadata; committing)\n"
    "\n"
    "COPY's columns are matched to the captured ones by name, ignoring case; others are\n"
    "dropped. Before anything is written, COPY's key columns are read and two rows of one\n"
    "key refused (the key: the capture instance's unique index; a table without one is not\n"
    "checked). The seed first waits, up to captureWaitSeconds (default\n"
    "600), for capture to record the capture instance's start LSN when it has not yet.\n"
    "A rerun with the same --as-of prints the seed already written. SIGINT/SIGTERM\n"
    "stop it before it commits its rows (exit 1, stopped on request; rerun it).\n"
    "Exit codes: 0 done,\n"
    "2 bad usage, options or copy (none at --from, no row without --allow-empty, a missing\n"
    "column, an as-of in the future, another snapshot in T), 3 the as-of's changes are\n"
    "not held (DataLossError), 7 T is not a bronze table or holds another table's rows,\n"
    "or COPY is T or lies in it, 18 a snapshot of the stream is\n"
    "open, 21 COPY holds two rows of one key, 22 capture has not started the capture\n"
    "instance within captureWaitSeconds.\n";

int cmd_seed(int argc, char **argv) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_opts *opts;
    if (mcdc_opts_create(&opts, &e)) return cli_fail(&e);
    mcdc_seed_cfg cfg = MCDC_SEED_CFG_INIT;
    cli_progress_mode mode = CLI_PROGRESS_AUTO;
    cli_progress prog;
    int rc = EXIT_OK;
    for (int i = 0; i < argc && rc == EXIT_OK; i++) {
        const char *a = argv[i];
        const char **slot = strcmp(a, "--target") == 0        ? &cfg.target
                            : strcmp(a, "--from") == 0        ? &cfg.from
                            : strcmp(a, "--as-of") == 0       ? &cfg.as_of
                            : strcmp(a, "--app-id") == 0      ? &cfg.app_id
                            : strcmp(a, "--facts-table") == 0 ? &cfg.facts_table
                            : strcmp(a, "--warehouse") == 0   ? &cfg.warehouse
                                                              : NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(SEED_HELP, stdout);
            goto out;
        } else if (slot) {
            if ((*slot = cli_value(argc, argv, &i)) == NULL) {
                rc = cli_usage_error("%s needs a value", a);
                goto out;
            }
        } else if (strcmp(a, "--allow-missing-columns") == 0) {
            cfg.allow_missing_columns = true;
        } else if (strcmp(a, "--reseed") == 0) {
            cfg.reseed = true;
        } else if (strcmp(a, "--allow-empty") == 0) {
            cfg.allow_empty = true;
        } else if (cli_job_option(opts, argc, argv, &i, &mode, &cfg.log_level, &rc)) {
            if (rc) goto out;
        } else {
            rc = cli_usage_error("seed: unknown argument '%s'", a);
            goto out;
        }
    }
    if (cfg.target == NULL || cfg.from == NULL || cfg.as_of == NULL) {
        rc = cli_usage_error("seed needs %s", "--target, --from and --as-of");
        goto out;
    }
    if ((rc = cli_source_env(opts, argc, argv)) != EXIT_OK) goto out;
    mcdc_offset off;
    int64_t rows = 0;
    bool written = false;
    rc = cli_progress_start(&prog, mode, &cfg.progress_fn, &cfg.progress_user, &cfg.log_fn,
                            &cfg.log_user);
    if (rc != EXIT_OK) goto out;
    mcdc_stop *stop = NULL;
    int st = mcdc_stop_create(&stop, &e);
    if (st == MCDC_OK) {
        cfg.stop = stop;
        cli_stop_signals_begin();
        cli_stop_signals_job(cli_stop_request, stop);
        st = mcdc_seed(&off, &rows, &written, opts, &cfg, &e);
        cli_stop_signals_end();
    }
    mcdc_stop_free(stop);
    cli_progress_end(&prog);
    if (st) {
        rc = cli_fail(&e);
        goto out;
    }
    cli_print_offset(&off);
    if (written) fprintf(stderr, "mssql-cdc: %s: seeded %lld rows at %s\n", cfg.target,
                         (long long)rows, off.lsn);
    else fprintf(stderr, "mssql-cdc: %s: holds this seed already: nothing written\n", cfg.target);
out:
    mcdc_opts_free(opts);
    return rc;
}
