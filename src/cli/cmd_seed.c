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
    "  --from COPY              a Delta table, a .parquet file, or a directory of them\n"
    "  --as-of WHEN             when the copy started being read: a UTC time\n"
    "                           (2026-12-01T10:00:00Z; an offset is converted), or an LSN\n"
    "                           (0x...) recorded before it. Every commit at or before it\n"
    "                           must be in the copy; later ones may be (the stream replays\n"
    "                           them). A time maps to the last commit at or before it, to\n"
    "                           the second, on the server's clock\n"
    "  --allow-missing-columns  captured columns COPY lacks read NULL (else an error)\n"
    "  --reseed                 replace the target's snapshot with a newer copy (after a\n"
    "                           DataLossError; then stream with a new checkpoint and app id)\n"
    "  --app-id A --facts-table F\n"
    "                           the stream's: a bootstrap row records the seed, and a\n"
    "                           snapshot of that stream still open is refused\n"
    "  --warehouse W            directory holding schema.table names (default ./warehouse)\n"
    "\n"
    "COPY's columns are matched to the captured ones by name, ignoring case; others are\n"
    "dropped. A rerun with the same --as-of prints the seed already written. Exit codes:\n"
    "0 done, 2 bad usage, options or copy (a missing column, an as-of in the future,\n"
    "another snapshot in T), 3 the as-of's changes are purged (DataLossError), 7 T is\n"
    "not a bronze table.\n";

int cmd_seed(int argc, char **argv) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_opts *opts;
    if (mcdc_opts_create(&opts, &e)) return cli_fail(&e);
    mcdc_seed_cfg cfg = MCDC_SEED_CFG_INIT;
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
        } else if (cli_source_option(opts, argc, argv, &i, &rc)) {
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
    if ((rc = cli_source_env(opts)) != EXIT_OK) goto out;
    mcdc_offset off;
    int64_t rows = 0;
    bool written = false;
    if (mcdc_seed(&off, &rows, &written, opts, &cfg, &e)) {
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
