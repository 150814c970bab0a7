/* cmd_table_rows.c - mssql-cdc table-rows: a Delta table's rows as JSON
 * lines. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static int line_out(void *ctx, const char *line) {
    int64_t *rows = ctx;
    ++*rows;
    return puts(line) < 0 ? -1 : 0;
}

int cmd_table_rows(int argc, char **argv) {
    if (argc < 1 || strcmp(argv[0], "--help") == 0) {
        fputs("usage: mssql-cdc table-rows TABLE [--warehouse W] [--storage-option NAME=VALUE]\n"
              "                            [--options-file FILE] [--verbose]\n"
              "Prints every row of a Delta table as one JSON object per line.\n"
              "  TABLE          a path (./bronze), an object store URI, or schema.table under\n"
              "                 --warehouse\n"
              "  --warehouse W  directory holding schema.table names (default ./warehouse)\n"
              CLI_STORAGE_HELP
              "  --options-file FILE  its [storage] section: storage options (other lines\n"
              "                 ignored)\n"
              "  --verbose      say on stderr how many rows were printed, of which table\n"
              "Exit 2 when TABLE is a bare name, on an object store not built yet, or holds\n"
              "no Delta table (a file, a directory without _delta_log/, nothing at all).\n",
              argc < 1 ? stderr : stdout);
        return argc < 1 ? EXIT_USAGE : EXIT_OK;
    }
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_opts *opts = NULL;
    if (mcdc_opts_create(&opts, &e)) return cli_fail(&e);
    const char *warehouse = NULL, *table = NULL;
    bool verbose = false;
    int rc = EXIT_OK;
    /* TABLE is the one argument that is no flag, wherever it stands */
    for (int i = 0; i < argc && rc == EXIT_OK; i++) {
        if (strcmp(argv[i], "--warehouse") == 0 && i + 1 >= argc)
            rc = cli_usage_error("%s needs a value", argv[i]);
        else if (strcmp(argv[i], "--warehouse") == 0) warehouse = argv[++i];
        else if (strcmp(argv[i], "--verbose") == 0) verbose = true;
        else if (cli_storage_option(opts, argc, argv, &i, &rc)) continue;
        else if (table == NULL && strncmp(argv[i], "--", 2) != 0) table = argv[i];
        else rc = cli_usage_error("table-rows: unknown argument '%s' (it reads one table)", argv[i]);
    }
    if (rc == EXIT_OK && table == NULL) rc = cli_usage_error("table-rows needs a TABLE%s", "");
    if (rc == EXIT_OK) rc = cli_storage_env(opts, argc, argv);
    int64_t rows = 0;
    if (rc == EXIT_OK && mcdc_table_rows_json_opts(opts, table, warehouse, line_out, &rows, &e))
        rc = cli_fail(&e);
    if (rc == EXIT_OK && verbose) {
        fflush(stdout);
        fprintf(stderr, "mssql-cdc: %lld rows of %s\n", (long long)rows, table);
    }
    mcdc_opts_free(opts);
    return rc;
}
