/*
 * cmd_finalization.c - mssql-cdc finalization: advance, show, is-final and
 * freshness of a table's finalized_until.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static const char FINAL_HELP[] =
    "usage: mssql-cdc finalization COMMAND --control-table C --table T [...]\n"
    "\n"
    "  advance --end-lsn L --end-commit-ts TS [--granularity hour|minute|day]\n"
    "        move T's finalized_until to the period holding TS (UTC), never back;\n"
    "        call only after the batch ending at L is committed\n"
    "  show      print T's finalized_until, when it moved and the LSN that moved it\n"
    "  is-final --period-end TS\n"
    "        exit 0 when the period ending at TS (UTC, exclusive) is complete,\n"
    "        10 when it is not (yet)\n"
    "  freshness  age_seconds (now - finalized_until) and seconds_since_update, and for\n"
    "            a silver table open_snapshot_lsn: the chunked snapshot holding its verdict\n"
    "\n"
    "  --warehouse W   directory holding schema.table names (default ./warehouse)\n"
    CLI_STORAGE_HELP
    "  --options-file FILE  its [storage] section: storage options (other lines ignored)\n"
    "  --json          print JSON\n"
    "  --verbose       say on stderr which row of the control table was read and what it\n"
    "                  holds (is-final: the row as read again after the answer)\n"
    "\n"
    "Exit codes: 0 done (is-final: final), 10 is-final: not final yet, 2 bad usage (an\n"
    "LSN or time that is none, an --end-commit-ts more than a day ahead), 7 a control\n"
    "table of another kind (a bronze or facts table, a directory of files).\n";

/* --verbose: the control row read, on stderr (stdout keeps the answer). */
static void say_verdict(const char *control, const char *table, const mcdc_verdict *vd) {
    char a[MCDC_TS_TEXT_SIZE], b[MCDC_TS_TEXT_SIZE];
    if (!vd->found) {
        fprintf(stderr, "mssql-cdc: control table %s holds no verdict for %s\n", control, table);
        return;
    }
    cli_format_ts(vd->finalized_until_us, a);
    cli_format_ts(vd->updated_at_us, b);
    fprintf(stderr, "mssql-cdc: control table %s, row %s: finalized_until %s, moved at %s by the "
                    "batch ending at %s%s\n",
            control, table, a, b, vd->end_lsn, vd->moved ? " (moved by this call)" : "");
}

static int finalization(int argc, char **argv, mcdc_opts *opts);

int cmd_finalization(int argc, char **argv) {
    if (argc < 1 || strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
        fputs(FINAL_HELP, argc < 1 ? stderr : stdout);
        return argc < 1 ? EXIT_USAGE : EXIT_OK;
    }
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_opts *opts = NULL;
    if (mcdc_opts_create(&opts, &e)) return cli_fail(&e);
    int rc = finalization(argc, argv, opts);
    mcdc_opts_free(opts);
    return rc;
}

/* The command, with opts holding the storage options given. */
static int finalization(int argc, char **argv, mcdc_opts *opts) {
    const char *sub = argv[0], *control = NULL, *table = NULL, *warehouse = NULL;
    const char *end_lsn = NULL, *end_ts = NULL, *period_end = NULL;
    mcdc_granularity g = MCDC_GRANULARITY_HOUR;
    int json = 0, verbose = 0, rc = EXIT_OK;
    mcdc_error e = MCDC_ERROR_INIT;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **slot = NULL;
        if (strcmp(a, "--control-table") == 0) slot = &control;
        else if (strcmp(a, "--table") == 0) slot = &table;
        else if (strcmp(a, "--warehouse") == 0) slot = &warehouse;
        else if (strcmp(a, "--end-lsn") == 0) slot = &end_lsn;
        else if (strcmp(a, "--end-commit-ts") == 0) slot = &end_ts;
        else if (strcmp(a, "--period-end") == 0) slot = &period_end;
        else if (strcmp(a, "--json") == 0) { json = 1; continue; }
        else if (strcmp(a, "--verbose") == 0) { verbose = 1; continue; }
        else if (cli_storage_option(opts, argc, argv, &i, &rc)) {
            if (rc) return rc;
            continue;
        }
        else if (strcmp(a, "--granularity") == 0) {
            const char *v = cli_value(argc, argv, &i);
            if (v == NULL) return cli_usage_error("%s needs a value", a);
            if (mcdc_granularity_parse(v, &g, &e)) return cli_fail(&e);
            continue;
        } else
            return cli_usage_error("finalization: unknown argument '%s'", a);
        const char *v = cli_value(argc, argv, &i);
        if (v == NULL) return cli_usage_error("%s needs a value", a);
        *slot = v;
    }
    if (control == NULL || table == NULL)
        return cli_usage_error("finalization %s needs --control-table and --table", sub);
    if ((rc = cli_storage_env(opts, argc, argv)) != EXIT_OK) return rc;
    mcdc_verdict vd;
    char a[MCDC_TS_TEXT_SIZE], b[MCDC_TS_TEXT_SIZE];
    if (strcmp(sub, "advance") == 0) {
        int64_t us;
        if (end_lsn == NULL || end_ts == NULL)
            return cli_usage_error("finalization %s needs --end-lsn and --end-commit-ts", sub);
        if (cli_parse_ts(end_ts, &us))
            return cli_usage_error("--end-commit-ts: expected YYYY-MM-DDTHH:MM:SS[.fff] (UTC), not '%s'",
                               end_ts);
        if (mcdc_verdict_advance_opts(&vd, opts, control, warehouse, table, end_lsn, us, g, &e))
            return cli_fail(&e);
        if (verbose) say_verdict(control, table, &vd);
        cli_format_ts(vd.finalized_until_us, a);
        if (json) printf("{\"finalized_until\":\"%s\",\"moved\":%s}\n", a, vd.moved ? "true" : "false");
        else printf("finalized_until %s%s\n", a, vd.moved ? "" : " (unchanged)");
        return EXIT_OK;
    }
    if (strcmp(sub, "is-final") == 0) {
        int64_t pe;
        bool final;
        if (period_end == NULL) return cli_usage_error("finalization %s needs --period-end", sub);
        if (cli_parse_ts(period_end, &pe))
            return cli_usage_error("--period-end: expected YYYY-MM-DDTHH:MM:SS (UTC), not '%s'", period_end);
        if (mcdc_verdict_is_final_opts(&final, opts, control, warehouse, table, pe, &e))
            return cli_fail(&e);
        if (verbose && mcdc_verdict_read_opts(&vd, opts, control, warehouse, table, &e) == MCDC_OK)
            say_verdict(control, table, &vd);
        printf(json ? "{\"is_final\":%s}\n" : "%s\n", final ? "true" : "false");
        return final ? EXIT_OK : EXIT_NOT_FINAL;
    }
    if (mcdc_verdict_read_opts(&vd, opts, control, warehouse, table, &e)) return cli_fail(&e);
    if (verbose) say_verdict(control, table, &vd);
    if (strcmp(sub, "show") == 0) {
        if (!vd.found) {
            printf(json ? "{\"finalized_until\":null}\n" : "no verdict yet for %s\n", table);
            return EXIT_OK;
        }
        cli_format_ts(vd.finalized_until_us, a);
        cli_format_ts(vd.updated_at_us, b);
        if (json)
            printf("{\"table_name\":\"%s\",\"finalized_until\":\"%s\",\"updated_at\":\"%s\","
                   "\"end_lsn\":\"%s\"}\n", table, a, b, vd.end_lsn);
        else
            printf("%s: finalized_until %s (moved %s by batch end %s)\n", table, a, b, vd.end_lsn);
        return EXIT_OK;
    }
    if (strcmp(sub, "freshness") == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t now = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
        bool has_open = false;
        char open[24], open_json[32] = "null";
        if (mcdc_verdict_open_snapshot_opts(&has_open, open, opts, control, warehouse, table, &e))
            return cli_fail(&e);
        if (has_open) snprintf(open_json, sizeof open_json, "\"%s\"", open);
        if (!vd.found) {
            if (json)
                printf("{\"finalized_until\":null,\"updated_at\":null,\"age_seconds\":null,"
                       "\"seconds_since_update\":null,\"open_snapshot_lsn\":%s}\n", open_json);
            else
                printf("no verdict yet%s%s\n", has_open ? ", held by the open snapshot " : "",
                       has_open ? open : "");
            return EXIT_OK;
        }
        cli_format_ts(vd.finalized_until_us, a);
        cli_format_ts(vd.updated_at_us, b);
        double age = (double)(now - vd.finalized_until_us) / 1e6;
        double since = (double)(now - vd.updated_at_us) / 1e6;
        if (json)
            printf("{\"finalized_until\":\"%s\",\"updated_at\":\"%s\",\"age_seconds\":%.3f,"
                   "\"seconds_since_update\":%.3f,\"open_snapshot_lsn\":%s}\n", a, b, age, since,
                   open_json);
        else
            printf("finalized_until %s, updated_at %s, age_seconds %.1f, seconds_since_update %.1f%s%s\n",
                   a, b, age, since, has_open ? ", held by the open snapshot " : "",
                   has_open ? open : "");
        return EXIT_OK;
    }
    return cli_usage_error("finalization: unknown command '%s' (advance, show, is-final, freshness)",
                       sub);
}
