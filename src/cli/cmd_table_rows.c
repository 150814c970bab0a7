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
        fputs("usage: mssql-cdc table-rows TABLE [--warehouse W] [--verbose]\n"
              "Prints every row of a Delta table as one JSON object per line.\n"
              "  TABLE          a path (./bronze), or schema.table under --warehouse\n"
              "  --warehouse W  directory holding schema.table names (default ./warehouse)\n"
              "  --verbose      say on stderr how many rows were printed, of which table\n"
              "Exit 2 when TABLE is a bare name, an object store, or holds no Delta table\n"
              "(a file, a directory without _delta_log/, nothing at all).\n",
              argc < 1 ? stderr : stdout);
        return argc < 1 ? EXIT_USAGE : EXIT_OK;
    }
    const char *warehouse = NULL;
    bool verbose = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--warehouse") == 0 && i + 1 >= argc)
            return cli_usage_error("%s needs a value", argv[i]);
        if (strcmp(argv[i], "--warehouse") == 0) warehouse = argv[++i];
        else if (strcmp(argv[i], "--verbose") == 0) verbose = true;
        else return cli_usage_error("table-rows: unknown argument '%s' (it reads one table)", argv[i]);
    }
    mcdc_error e = MCDC_ERROR_INIT;
    int64_t rows = 0;
    if (mcdc_table_rows_json(argv[0], warehouse, line_out, &rows, &e)) return cli_fail(&e);
    if (verbose) {
        fflush(stdout);
        fprintf(stderr, "mssql-cdc: %lld rows of %s\n", (long long)rows, argv[0]);
    }
    return EXIT_OK;
}
