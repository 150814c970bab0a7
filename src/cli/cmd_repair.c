/* cmd_repair.c - mssql-cdc repair: the keys that differ, read again from SQL Server and
 * appended to bronze as a recorded repair (docs/repair.md). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char REPAIR_HELP[] =
    "usage: mssql-cdc repair --bronze B --facts-table F source options\n"
    "                        (--report-table R --run-id ID | --keys-file FILE [--run-id ID])\n"
    "\n"
    "Reads the current row of each key from SQL Server and appends it to bronze B as a\n"
    "recorded repair, so that the next `mssql-cdc apply` fixes silver through its normal\n"
    "path. Prints {\"run_id\", \"lsn\", \"commit_ts\", \"keys\", \"images\", \"deletes\",\n"
    "\"bronze_version\", \"already\"} as JSON on stdout.\n"
    "\n"
    "The keys are JSON objects of the key columns (the capture instance's unique index),\n"
    "as reconcile's report holds them: {\"id\": 42}, {\"region\": \"EU\", \"id\": 7}; null for\n"
    "a NULL key value. Each is checked against B's columns before anything is read (an\n"
    "unknown column, a missing one, a value of the wrong type: exit 2, nothing written).\n"
    "\n"
    "The repair takes L = max_lsn, then reads the keys' rows (READ COMMITTED, a query per\n"
    "1000 keys; a datetime2(7) or datetimeoffset(7) key by its microsecond, a key with\n"
    "more than one source row in it refused: exit 2, nothing written), and appends in\n"
    "one commit an operation 4 row (the image) for each key the table has and an\n"
    "operation 1 row (a delete) for each it lacks, stamped\n"
    "_start_lsn L and L's commit time, _seqval NULL, with txn(mssql-cdc.repair.<ID>, 0);\n"
    "then a facts row of event 'repair' in F. apply ranks a repair row above every\n"
    "change at or below L and below every later one. Run again with the same ID (or\n"
    "after a kill), nothing is appended twice. The stream's txn and verdict are not\n"
    "touched. mssql-cdc reconcile --repair runs this repair on the keys it found.\n"
    "\n"
    "  --bronze B           the stream's target, named as the stream was given it\n"
    "  --facts-table F      the stream's facts table (apply finds the repair there)\n"
    "  --report-table R     reconcile's report: the keys of run ID whose failure_type is\n"
    "                       MISSING_TARGET, MISSING_SOURCE, RECORD_DIFF or\n"
    "                       DUPLICATE_TARGET (not IN_FLIGHT)\n"
    "  --run-id ID          the reconcile run (with --report-table: one R holds, else\n"
    "                       exit 2 naming the newest runs it holds), else the repair's\n"
    "                       id (default: a new UUID); letters, digits and ._:-\n"
    "  --keys-file FILE     one key object a line (blank lines skipped; - for stdin)\n"
    "  --warehouse W        directory holding schema.table names (default ./warehouse)\n"
    CLI_STORAGE_HELP
    "  --verbose            what the repair read and wrote\n"
    "\n"
    "Source options as for stream (captureInstance, connectionString, ...). A\n"
    "captureInstance that is gone (one B's rows name) is followed through the instances\n"
    "B's rows name (exit 4 when none of its table is left); one that is not B's table's\n"
    "is refused before anything is read (exit 7).\n"
    "\n"
    "SIGINT/SIGTERM stop it before it commits its rows (exit 1, stopped on request; rerun it).\n"
    "\n"
    "Exit codes: 0 repaired (or nothing to repair, or done before under this ID);\n"
    "2 bad usage, a bad key, bronze or R missing, a run ID R does not hold, a table\n"
    "without a unique index, or a key with more than one source row;\n"
    "7 a table of another kind, B and F one table, or options of another table than\n"
    "B's; 8 the run's facts row stands but B lacks its commit; 12 another program\n"
    "committed under the run's app id; others as for stream.\n";

/* The lines of path ("-": stdin) that are not blank, as strings (owned). */
static int read_lines(const char *path, char ***out, size_t *n) {
    *out = NULL;
    *n = 0;
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "mssql-cdc: --keys-file %s: %s: give a file of one JSON key object a "
                        "line (- for stdin)\n", path, strerror(errno));
        return EXIT_USAGE;
    }
    char *line = NULL;
    size_t cap = 0, have = 0;
    ssize_t len;
    int rc = EXIT_OK;
    while ((len = getline(&line, &cap, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        size_t sp = strspn(line, " \t");
        if (line[sp] == 0) continue;
        if (*n == have) {
            size_t nh = have ? have * 2 : 64;
            char **v = realloc(*out, nh * sizeof *v);
            if (v == NULL) {
                rc = EXIT_ERROR;
                break;
            }
            *out = v;
            have = nh;
        }
        if (((*out)[*n] = strdup(line)) == NULL) {
            rc = EXIT_ERROR;
            break;
        }
        (*n)++;
    }
    int read_errno = errno;
    bool unread = rc == EXIT_OK && ferror(f);
    free(line);
    if (f != stdin) fclose(f);
    if (rc) fprintf(stderr, "mssql-cdc: --keys-file %s: out of memory\n", path);
    if (unread) {
        /* a directory opens, and fails the first read */
        fprintf(stderr, "mssql-cdc: --keys-file %s: cannot read it (%s): give a file of one JSON "
                        "key object a line\n", path, strerror(read_errno));
        rc = EXIT_USAGE;
    }
    return rc;
}

int cmd_repair(int argc, char **argv) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_opts *opts;
    if (mcdc_opts_create(&opts, &e)) return cli_fail(&e);
    mcdc_repair_cfg cfg = MCDC_REPAIR_CFG_INIT;
    const char *keys_file = NULL;
    char **keys = NULL;
    size_t n_keys = 0;
    int rc = EXIT_OK;
    for (int i = 0; i < argc && rc == EXIT_OK; i++) {
        const char *a = argv[i], *v = NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(REPAIR_HELP, stdout);
            goto out;
        } else if (strcmp(a, "--bronze") == 0) {
            NEEDV();
            cfg.bronze = v;
        } else if (strcmp(a, "--facts-table") == 0) {
            NEEDV();
            cfg.facts_table = v;
        } else if (strcmp(a, "--report-table") == 0) {
            NEEDV();
            cfg.report_table = v;
        } else if (strcmp(a, "--run-id") == 0) {
            NEEDV();
            cfg.run_id = v;
        } else if (strcmp(a, "--keys-file") == 0) {
            NEEDV();
            keys_file = v;
        } else if (strcmp(a, "--warehouse") == 0) {
            NEEDV();
            cfg.warehouse = v;
        } else if (strcmp(a, "--verbose") == 0) {
            cfg.log_level = MCDC_LOG_INFO;
        } else if (cli_source_option(opts, argc, argv, &i, &rc)) {
            if (rc) goto out;
        } else {
            rc = cli_usage_error("repair: unknown argument '%s'", a);
            goto out;
        }
    }
    if (cfg.bronze == NULL || cfg.facts_table == NULL) {
        rc = cli_usage_error("repair needs %s", "--bronze and --facts-table");
        goto out;
    }
    if ((cfg.report_table == NULL) == (keys_file == NULL)) {
        rc = cli_usage_error("repair takes its keys from %s, one of the two",
                             "--report-table R --run-id ID or --keys-file FILE");
        goto out;
    }
    if (cfg.report_table && cfg.run_id == NULL) {
        rc = cli_usage_error("--report-table needs %s", "--run-id (the reconcile run's run_id)");
        goto out;
    }
    if (keys_file) {
        if ((rc = read_lines(keys_file, &keys, &n_keys)) != EXIT_OK) goto out;
        cfg.keys_json = (const char *const *)keys;
        cfg.n_keys = n_keys;
        if (keys == NULL) cfg.keys_json = (const char *const *)&keys_file; /* no keys: n_keys 0 */
    }
    if ((rc = cli_source_env(opts, argc, argv)) != EXIT_OK) goto out;
    mcdc_repair_result res = {.size = sizeof res};
    mcdc_stop *stop = NULL;
    int st = mcdc_stop_create(&stop, &e);
    if (st == MCDC_OK) {
        cfg.stop = stop;
        cli_stop_signals_begin();
        cli_stop_signals_job(cli_stop_request, stop);
        st = mcdc_repair_run(opts, &cfg, &res, &e);
        cli_stop_signals_end();
    }
    mcdc_stop_free(stop);
    if (st != MCDC_OK) {
        rc = cli_fail(&e);
        goto out;
    }
    char json[MCDC_REPAIR_RESULT_JSON_SIZE];
    if (mcdc_repair_result_json(json, sizeof json, &res, &e) != MCDC_OK) {
        rc = cli_fail(&e);
        goto out;
    }
    printf("%s\n", json);
    rc = EXIT_OK;
out:
    for (size_t i = 0; i < n_keys; i++) free(keys[i]);
    free(keys);
    mcdc_opts_free(opts);
    return rc;
}
