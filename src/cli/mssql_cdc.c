/*
 * mssql-cdc - the command-line program. Uses the public header only.
 * One file per command (cmd_*.c); what they share is in cli.h.
 *
 *   mssql-cdc stream ...          stream CDC changes into bronze (to_delta)
 *   mssql-cdc start-many ...      a stream per capture instance, in one process
 *   mssql-cdc serve --config F    the tables of a config file, as a service
 *   mssql-cdc snapshot ...        the table's rows into bronze (snapshot)
 *   mssql-cdc seed ...            a copy of the table into bronze (seed)
 *   mssql-cdc backfill ...        a chunked snapshot in waves (backfill)
 *   mssql-cdc apply ...           silver from bronze (apply_changes)
 *   mssql-cdc reconcile ...       is silver equal to the source table? (reconcile)
 *   mssql-cdc repair ...          the keys that differ, read again into bronze
 *   mssql-cdc finalization ...    advance | show | is-final | freshness
 *   mssql-cdc table-rows TABLE    print a table's rows as JSON lines
 *   mssql-cdc version
 */
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char HELP[] =
    "usage: mssql-cdc COMMAND [ARGS]\n"
    "\n"
    "Streams SQL Server Change Data Capture into Delta Lake tables exactly once.\n"
    "\n"
    "Commands:\n"
    "  stream         stream a capture instance into bronze, with facts and the verdict\n"
    "  start-many     stream many capture instances in one process, on one budget\n"
    "  serve          the tables of a config file as a long-running service (SIGHUP\n"
    "                 rereads it)\n"
    "  snapshot       append the table's current rows to bronze, print the offset\n"
    "  seed           append a copy of the table you have to bronze as its snapshot\n"
    "  backfill       read a chunked snapshot in waves next to the running stream\n"
    "  apply          keep silver, the table's current state, from bronze\n"
    "  reconcile      prove silver equals the SQL Server table, or list what differs\n"
    "  repair         read the keys that differ again and append them to bronze\n"
    "  finalization   advance | show | is-final | freshness of finalized_until\n"
    "  table-rows     print the rows of a Delta table as JSON lines\n"
    "  version        print the version\n"
    "\n"
    "Tables are paths (./bronze, /lake/bronze, file:///lake/bronze) or schema.table\n"
    "names, the directory <warehouse>/<schema>.db/<table> (--warehouse, default\n"
    "./warehouse). A bare name (bronze) is refused: write ./bronze or <schema>.bronze.\n"
    "Object stores: s3:// (s3a://), and abfss://, abfs://, az://, wasbs://, wasb://\n"
    "(Azure Blob Storage), with storage options (docs/object-stores.md); gs:// is\n"
    "not built yet (exit 2).\n"
    "\n"
    "snapshot, seed, backfill, apply, reconcile and stream's snapshots say how far they\n"
    "are on stderr (--progress auto|line|json|none); stdout holds the result alone.\n"
    "Every command takes --verbose.\n"
    "\n"
    "'mssql-cdc COMMAND --help' describes each command.\n";

static int run(int argc, char **argv);

int main(int argc, char **argv) {
    /* Column buffers of tens of MB are freed and allocated again for every
     * batch. Kept in glibc's heap instead of going back to the kernel, they
     * are not page-faulted and zeroed again (45% of a read's CPU measured in
     * bench-lake). What is kept never exceeds the peak already reached. */
    mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
    mallopt(M_TRIM_THRESHOLD, 256 * 1024 * 1024);
    char **args = cli_argv_private(argc, argv);
    if (args == NULL) {
        fputs("mssql-cdc: out of memory reading the command line\n", stderr);
        return EXIT_ERROR;
    }
    int rc = run(argc, args);
    cli_argv_free(args);
    return rc;
}

static int run(int argc, char **argv) {
    if (argc < 2) {
        fputs(HELP, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        fputs(HELP, stdout);
        return EXIT_OK;
    }
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("mssql-cdc %s\n", mcdc_version());
        return EXIT_OK;
    }
    if (strcmp(cmd, "stream") == 0) return cmd_stream(argc - 2, argv + 2);
    if (strcmp(cmd, "start-many") == 0) return cmd_start_many(argc - 2, argv + 2);
    if (strcmp(cmd, "serve") == 0) return cmd_serve(argc - 2, argv + 2);
    if (strcmp(cmd, "snapshot") == 0) return cmd_snapshot(argc - 2, argv + 2);
    if (strcmp(cmd, "seed") == 0) return cmd_seed(argc - 2, argv + 2);
    if (strcmp(cmd, "backfill") == 0) return cmd_backfill(argc - 2, argv + 2);
    if (strcmp(cmd, "apply") == 0) return cmd_apply(argc - 2, argv + 2);
    if (strcmp(cmd, "reconcile") == 0) return cmd_reconcile(argc - 2, argv + 2);
    if (strcmp(cmd, "repair") == 0) return cmd_repair(argc - 2, argv + 2);
    if (strcmp(cmd, "finalization") == 0) return cmd_finalization(argc - 2, argv + 2);
    if (strcmp(cmd, "table-rows") == 0) return cmd_table_rows(argc - 2, argv + 2);
    return cli_usage_error("unknown command '%s'", cmd);
}
