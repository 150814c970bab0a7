/* cli_common.c - exit codes, messages, timestamps and option values shared
 * by the commands (cli.h). */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "mssqlcdc_testing.h"

int cli_exit_code(int status) {
    switch (status) {
    case MCDC_OK: return EXIT_OK;
    case MCDC_E_INVALID:
    case MCDC_E_NOTFOUND: return EXIT_USAGE;
    case MCDC_E_DATALOSS: return EXIT_DATALOSS;
    case MCDC_E_SCHEMA: return EXIT_SCHEMA;
    case MCDC_E_PERMISSION: return EXIT_PERMISSION;
    case MCDC_E_TRANSIENT: return EXIT_TRANSIENT;
    case MCDC_E_MISMATCH: return EXIT_MISMATCH;
    case MCDC_E_TARGET_BEHIND: return EXIT_TARGET_BEHIND;
    case MCDC_E_REWOUND: return EXIT_REWOUND;
    case MCDC_E_FACTS_BEHIND: return EXIT_FACTS_BEHIND;
    case MCDC_E_FOREIGN_WRITER: return EXIT_FOREIGN_WRITER;
    case MCDC_E_LOGIN: return EXIT_LOGIN;
    case MCDC_E_SNAPSHOT_OPEN: return EXIT_SNAPSHOT_OPEN;
    case MCDC_E_NOT_UNIQUE: return EXIT_NOT_UNIQUE;
    case MCDC_E_NOT_READY: return EXIT_NOT_READY;
    default: return EXIT_ERROR;
    }
}

/* What SIGINT/SIGTERM stop: the command's one job (the CLI's own state, not
 * the library's). g_job is written before g_stop_fn, and a handler that
 * sees the function sees its job. */
static volatile sig_atomic_t g_signalled;
static void *volatile g_job;
static volatile cli_stop_fn g_stop_fn;

static void stop_on_signal(int sig) {
    (void)sig;
    g_signalled = 1;
    cli_stop_fn stop = g_stop_fn;
    if (stop) stop(g_job);
}

void cli_stop_signals_begin(void) {
    g_stop_fn = NULL;
    g_job = NULL;
    g_signalled = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = stop_on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

void cli_stop_signals_job(cli_stop_fn stop, void *job) {
    g_stop_fn = NULL;
    g_job = job;
    g_stop_fn = stop;
    /* a signal before the job existed: asked now (asking twice is harmless) */
    if (g_signalled && stop && job) stop(job);
}

void cli_stop_signals_end(void) {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    g_stop_fn = NULL;
    g_job = NULL;
}

void cli_stop_request(void *stop) { mcdc_stop_request(stop); }
void cli_stop_stream(void *stream) { mcdc_stream_request_stop(stream); }
void cli_stop_apply(void *apply) { mcdc_apply_request_stop(apply); }
void cli_stop_backfill(void *backfill) { mcdc_backfill_request_stop(backfill); }
void cli_stop_reconcile(void *reconcile) { mcdc_reconcile_request_stop(reconcile); }

int cli_fail(const mcdc_error *e) {
    const char *kind = mcdc_status_kind(e->code);
    fprintf(stderr, "mssql-cdc: error%s%s%s: %s\n", *kind ? " (" : "", kind, *kind ? ")" : "",
            e->message);
    return cli_exit_code(e->code);
}

int cli_usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "mssql-cdc: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(see 'mssql-cdc --help')\n");
    return EXIT_USAGE;
}

void cli_format_ts(int64_t us, char out[MCDC_TS_TEXT_SIZE]) {
    /* Outside years 0001-9999 (no verdict is): the number itself. */
    if (mcdc_ts_format(out, MCDC_TS_TEXT_SIZE, us, 3, NULL) != MCDC_OK)
        snprintf(out, MCDC_TS_TEXT_SIZE, "%lld us", (long long)us);
}

void cli_print_offset(const mcdc_offset *off) {
    char ts[MCDC_TS_TEXT_SIZE] = "";
    if (off->has_commit_ts) cli_format_ts(off->commit_us, ts);
    printf("{\"lsn\": \"%s\", \"commit_ts\": %s%s%s}\n", off->lsn, off->has_commit_ts ? "\"" : "",
           off->has_commit_ts ? ts : "null", off->has_commit_ts ? "\"" : "");
}

int cli_parse_ts(const char *s, int64_t *out) {
    return mcdc_ts_parse(out, s, NULL) == MCDC_OK ? 0 : -1;
}

const char *cli_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) return NULL;
    return argv[++*i];
}

static bool is_option_name(const char *name) {
    for (const char *const *n = mcdc_opts_known_names(); *n; n++)
        if (strcasecmp(*n, name) == 0) return true;
    return false;
}

/* A storage option's name or another spelling of it delta-rs accepts. */
static bool is_storage_name(const char *name, size_t n) {
    char buf[72];
    if (n >= sizeof buf) return false;
    snprintf(buf, sizeof buf, "%.*s", (int)n, name);
    return mcdc_opts_storage_name(buf) != NULL;
}

/* The refusal of a --storage-option, with the names there are. */
static int storage_usage(const char *what, const char *name, int name_len) {
    fprintf(stderr, "mssql-cdc: --storage-option ");
    fprintf(stderr, what, name_len, name);
    fprintf(stderr, "\nThe storage options (any case) are:");
    int col = 80;
    for (const char *const *s = mcdc_opts_storage_names(); *s; s++) {
        int n = (int)strlen(*s) + 1;
        if (col + n > 78) {
            fprintf(stderr, "\n ");
            col = 1;
        }
        fprintf(stderr, " %s", *s);
        col += n;
    }
    fprintf(stderr, "\nand delta-rs's other spellings of them (access_key_id, account_key, "
                    "sas_key, use_emulator...;\nnot endpoint, token or allow_http, which "
                    "name an S3 and an Azure option alike)\n(see 'mssql-cdc --help')\n");
    return EXIT_USAGE;
}

/* "<scheme>://" other than file: (a path or file: URI is local). */
static bool uri_remote(const char *s) {
    if (strncasecmp(s, "file:", 5) == 0) return false;
    const char *p = s;
    while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
           *p == '+' || *p == '-' || *p == '.')
        p++;
    return p > s && strncmp(p, "://", 3) == 0;
}

bool cli_location_remote(const char *table, const char *warehouse) {
    if (table == NULL) return false;
    /* the library's rule: a '/' or ':' makes a location, else schema.table */
    if (strchr(table, '/') || strchr(table, ':')) return uri_remote(table);
    return warehouse && uri_remote(warehouse);
}

/* --storage-option NAME=VALUE. The value may be a secret: no message shows
 * it, nor an argument that lacks its '=' (a secret pasted alone). */
static int set_storage_pair(mcdc_opts *opts, const char *v) {
    const char *eq = strchr(v, '=');
    if (eq == NULL)
        return storage_usage("expects NAME=VALUE, and its argument has no '=' (not shown: it "
                             "may be a secret)%.*s",
                             "", 0);
    int n = (int)(eq - v);
    if (n == 0) return storage_usage("expects NAME=VALUE, and the name before '=' is empty%.*s", "", 0);
    char name[72];
    snprintf(name, sizeof name, "%.*s", n > 64 ? 64 : n, v);
    const char *means = n > 64 ? NULL : mcdc_opts_storage_ambiguous(name);
    if (means) { /* the library's words for it (an options file's [storage] gets the same) */
        char why[200];
        snprintf(why, sizeof why, "'%s=...' is ambiguous: delta-rs reads it for S3 and for "
                 "Azure alike; write %s", name, means);
        return storage_usage("%.*s", why, (int)strlen(why));
    }
    if (n > 64 || !is_storage_name(v, (size_t)n))
        return storage_usage("'%.*s=...': no storage option has that name", v, n > 64 ? 64 : n);
    mcdc_error e = MCDC_ERROR_INIT;
    return mcdc_opts_set(opts, name, eq + 1, NULL, &e) ? cli_fail(&e) : EXIT_OK;
}

int cli_storage_option(mcdc_opts *opts, int argc, char **argv, int *i, int *rc) {
    const char *a = argv[*i];
    bool file = strcmp(a, "--options-file") == 0;
    if (!file && strcmp(a, "--storage-option") != 0) return 0;
    const char *v = cli_value(argc, argv, i);
    mcdc_error e = MCDC_ERROR_INIT;
    if (v == NULL) *rc = cli_usage_error("%s needs a value", a);
    else if (file && mcdc_opts_load_file(opts, v, &e)) *rc = cli_fail(&e);
    else if (!file) *rc = set_storage_pair(opts, v);
    return 1;
}

int cli_job_option(mcdc_opts *opts, int argc, char **argv, int *i, cli_progress_mode *mode,
                   mcdc_log_level *level, int *rc) {
    if (strcmp(argv[*i], "--verbose") == 0) {
        *level = MCDC_LOG_INFO;
        return 1;
    }
    return cli_progress_option(argc, argv, i, mode, rc) ||
           cli_source_option(opts, argc, argv, i, rc);
}

int cli_source_option(mcdc_opts *opts, int argc, char **argv, int *i, int *rc) {
    if (cli_storage_option(opts, argc, argv, i, rc)) return 1;
    const char *a = argv[*i];
    bool pair = strcmp(a, "-o") == 0 || strcmp(a, "--option") == 0;
    bool named = strncmp(a, "--", 2) == 0 && is_option_name(a + 2);
    if (!pair && !named) return 0;
    const char *v = cli_value(argc, argv, i);
    mcdc_error e = MCDC_ERROR_INIT;
    if (v == NULL) {
        *rc = cli_usage_error("%s needs a value", a);
    } else if (pair) {
        const char *eq = strchr(v, '=');
        char name[128];
        if (eq == NULL || (size_t)(eq - v) >= sizeof name) {
            *rc = cli_usage_error("-o expects name=value, got '%s'", v);
        } else {
            snprintf(name, sizeof name, "%.*s", (int)(eq - v), v);
            if (mcdc_opts_set(opts, name, eq + 1, NULL, &e)) *rc = cli_fail(&e);
        }
    } else if (mcdc_opts_set(opts, a + 2, v, NULL, &e)) {
        *rc = cli_fail(&e);
    }
    return 1;
}

/* Where a storage option came from, for --verbose. */
typedef enum { FROM_NONE, FROM_FILE, FROM_ENV, FROM_FLAG } storage_from;

/* --verbose: the storage options the job gets and where each came from;
 * a secret's value redacted. */
static void say_storage(const mcdc_opts *opts, const storage_from *from) {
    static const char *const WHERE[] = {"", "options file or -o", "environment",
                                        "--storage-option"};
    const char *const *names = mcdc_opts_storage_names();
    for (size_t k = 0; names[k]; k++) {
        const char *v = mcdc_opts_get(opts, names[k]);
        /* HOME is every process's: said when someone set it for the stores */
        if (v == NULL || (from[k] == FROM_ENV && strcmp(names[k], "HOME") == 0)) continue;
        fprintf(stderr, "mssql-cdc: storage option %s=%s (%s)\n", names[k],
                mcdc_opts_storage_secret(names[k]) ? "<redacted>" : v, WHERE[from[k]]);
    }
}

int cli_storage_env(mcdc_opts *opts, int argc, char **argv) {
    mcdc_error e = MCDC_ERROR_INIT;
    storage_from from[128] = {FROM_NONE};
    const char *const *names = mcdc_opts_storage_names();
    for (size_t k = 0; names[k] && k < sizeof from / sizeof from[0]; k++) {
        if (mcdc_opts_get(opts, names[k]) != NULL) {
            from[k] = FROM_FILE;
            continue;
        }
        const char *v = getenv(names[k]);
        if (v == NULL || *v == 0) continue;
        if (mcdc_opts_set(opts, names[k], v, NULL, &e)) {
            fprintf(stderr, "mssql-cdc: error: the environment variable %s: %s (fix or unset "
                            "it)\n",
                    names[k], e.message);
            return EXIT_USAGE;
        }
        from[k] = FROM_ENV;
    }
    bool verbose = false;
    for (int i = 0; i < argc; i++) {
        verbose |= strcmp(argv[i], "--verbose") == 0;
        if (strcmp(argv[i], "--storage-option") != 0 || i + 1 >= argc) continue;
        int rc = set_storage_pair(opts, argv[++i]);
        if (rc != EXIT_OK) return rc;
        char given[72]; /* set_storage_pair took it: a name or alias of at most 64 bytes */
        snprintf(given, sizeof given, "%.*s", (int)(strchr(argv[i], '=') - argv[i]), argv[i]);
        const char *name = mcdc_opts_storage_name(given);
        for (size_t k = 0; name && names[k] && k < sizeof from / sizeof from[0]; k++)
            if (strcmp(names[k], name) == 0) from[k] = FROM_FLAG;
    }
    if (verbose) say_storage(opts, from);
    return EXIT_OK;
}

int cli_source_env(mcdc_opts *opts, int argc, char **argv) {
    int rc = cli_storage_env(opts, argc, argv);
    if (rc != EXIT_OK) return rc;
    const char *backend = getenv("MCDC_TDS_BACKEND");
    mcdc_error e = MCDC_ERROR_INIT;
    if (backend && *backend && mcdc_opts_set(opts, "backend", backend, NULL, &e)) return cli_fail(&e);
    const char *crash_at = getenv("MCDC_CRASH_AT");
    if (crash_at && mcdc_opts_set_crash_at(opts, crash_at, &e)) return cli_fail(&e);
    const char *backoff = getenv("MCDC_RETRY_BACKOFF_MS");
    if (backoff) {
        char *end;
        errno = 0;
        long long ms = strtoll(backoff, &end, 10);
        if (errno || end == backoff || *end) {
            fprintf(stderr, "mssql-cdc: MCDC_RETRY_BACKOFF_MS must be a whole number of "
                            "milliseconds, not '%s'\n", backoff);
            return EXIT_USAGE;
        }
        if (mcdc_opts_set_retry_backoff_ms(opts, ms, &e)) return cli_fail(&e);
    }
    return EXIT_OK;
}

/* How many characters of v are an optional '-' and decimal digits, with
 * (fraction) an optional '.' and more digits; 0 when no digit. */
static size_t number_chars(const char *v, int fraction) {
    size_t i = v[0] == '-', d = 0;
    for (; v[i] >= '0' && v[i] <= '9'; i++) d++;
    if (fraction && v[i] == '.')
        for (i++; v[i] >= '0' && v[i] <= '9'; i++) d++;
    return d ? i : 0;
}

int cli_parse_trigger(const char *v, mcdc_trigger *trigger, int64_t *processing_time_ms) {
    if (strcasecmp(v, "default") == 0) *trigger = MCDC_TRIGGER_DEFAULT;
    else if (strcasecmp(v, "availableNow") == 0) *trigger = MCDC_TRIGGER_AVAILABLE_NOW;
    else if (strcasecmp(v, "once") == 0) *trigger = MCDC_TRIGGER_ONCE;
    else if (strncasecmp(v, "processingTime=", 15) == 0) {
        /* digits and a fraction only (no sign, space, exponent or hex) */
        size_t digits = v[15] == '-' ? 0 : number_chars(v + 15, 1);
        char *end = NULL;
        errno = 0;
        double n = digits ? strtod(v + 15, &end) : 0;
        if (digits == 0 || end != v + 15 + digits) return -1;
        double mult = 1000;
        if (strcmp(end, "ms") == 0) mult = 1;
        else if (strcmp(end, "s") == 0 || *end == 0) mult = 1000;
        else if (strcmp(end, "m") == 0) mult = 60000;
        else return -1;
        /* A week at most: anything larger is a typo, and would overflow
         * the clock arithmetic (NaN and inf fail the comparison too). */
        double ms = n * mult;
        if (errno || end == v + 15 || !(ms >= 1 && ms <= 7.0 * 24 * 3600 * 1000)) return -1;
        *trigger = MCDC_TRIGGER_PROCESSING_TIME;
        *processing_time_ms = (int64_t)ms;
    } else
        return -1;
    return 0;
}

/* A bound as people write it: 31536000, not 3.1536e+07. */
static void bound_text(char out[32], double x) {
    if (x >= -1e15 && x <= 1e15 && x == (double)(long long)x) snprintf(out, 32, "%lld", (long long)x);
    else snprintf(out, 32, "%g", x);
}

static int range_error(const char *flag, const char *v, const char *what, const char *lo,
                       const char *hi) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s must be %s at least %s and at most %s, not '%.64s%s'", flag, what, lo, hi, v,
             strlen(v) > 64 ? "..." : "");
    return cli_usage_error("%s", msg);
}

int cli_parse_int(const char *flag, const char *v, int64_t min, int64_t max, int64_t *out) {
    size_t n = number_chars(v, 0);
    errno = 0;
    char *end = NULL;
    long long x = n && v[n] == 0 ? strtoll(v, &end, 10) : 0;
    if (n == 0 || v[n] != 0 || errno == ERANGE || end != v + n || x < min || x > max) {
        char lo[24], hi[24];
        snprintf(lo, sizeof lo, "%lld", (long long)min);
        snprintf(hi, sizeof hi, "%lld", (long long)max);
        return range_error(flag, v, "a whole number", lo, hi);
    }
    *out = x;
    return EXIT_OK;
}

int cli_parse_number(const char *flag, const char *v, double min, double max, double *out) {
    size_t n = number_chars(v, 1);
    char *end = NULL;
    double x = n && v[n] == 0 ? strtod(v, &end) : 0;
    /* digits only: strtod takes no exponent or hex here, so x is finite */
    if (n == 0 || v[n] != 0 || end != v + n || !(x >= min && x <= max)) {
        char lo[32], hi[32];
        bound_text(lo, min);
        bound_text(hi, max);
        return range_error(flag, v, "a number", lo, hi);
    }
    *out = x;
    return EXIT_OK;
}

/* --keys: a JSON list of names (["region","id"]) or names separated by
 * commas. keys[] point into buf (a copy of v). */
int cli_parse_keys(const char *v, char *buf, size_t cap, const char **keys, int32_t *n) {
    *n = 0;
    size_t len = strlen(v);
    if (len == 0 || len >= cap) return -1;
    memcpy(buf, v, len + 1);
    char *p = buf, *end = buf + len;
    while (p < end && *p == ' ') p++;
    while (end > p && end[-1] == ' ') end--;
    bool json = p < end && *p == '[';
    if (json) {
        if (end - p < 2 || end[-1] != ']') return -1;
        p++;
        end--;
    }
    *end = 0;
    for (char *tok = p;;) {
        char *comma = strchr(tok, ',');
        if (comma) *comma = 0;
        while (*tok == ' ') tok++;
        char *te = tok + strlen(tok);
        while (te > tok && te[-1] == ' ') te--;
        *te = 0;
        if (json) {
            size_t l = strlen(tok);
            if (l < 2 || tok[0] != '"' || tok[l - 1] != '"') return -1;
            tok[l - 1] = 0;
            tok++;
            if (strchr(tok, '"') || strchr(tok, '\\')) return -1; /* no escapes */
        }
        if (*tok == 0 || *n >= 32) return -1;
        keys[(*n)++] = tok;
        if (!comma) break;
        tok = comma + 1;
    }
    return 0;
}
