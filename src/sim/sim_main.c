/*
 * sim_main.c - the mssql-cdc-sim program: a SQL Server CDC simulator that
 * real SQL Server clients connect to over TDS.
 *
 *   mssql-cdc-sim [serve] --port PORT --data DIR (--password-file FILE | --password PW) [options]
 *   mssql-cdc-sim <subcommand> ...   (see g_subcommands)
 */
#include <errno.h>
#include <stdbool.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim_engine.h"
#include "tds_server.h"

#define EXIT_USAGE 2

static const char g_usage[] =
    "usage: mssql-cdc-sim [serve] --port PORT --data DIR (--password-file FILE | --password PW) [options]\n"
    "\n"
    "A SQL Server CDC simulator: a TDS server on 127.0.0.1 that SQL Server clients\n"
    "(FreeTDS tsql, pymssql, python-tds, mssql-cdc) connect to, with a model of\n"
    "SQL Server change data capture behind it. Log in as 'sa' with the password.\n"
    "TLS as SQL Server does it (TDS 7.x in PRELOGIN packets, TDS 8.0 strict).\n"
    "\n"
    "required:\n"
    "  --port PORT              TCP port to listen on (0 = any free port)\n"
    "  --data DIR               directory holding the server's state (created if\n"
    "                           missing; it and its files are the owner's only, 0700/0600)\n"
    "  --password-file FILE     password of the login 'sa': the first line of FILE\n"
    "  --password PW            the same on the command line (other users see it in\n"
    "                           ps until the server has started; prefer the file, or\n"
    "                           the environment variable MSSQL_CDC_SIM_PASSWORD)\n"
    "                           Passwords are kept as salted SHA-512 hashes, as SQL\n"
    "                           Server keeps them; a data directory of an older build\n"
    "                           with a plaintext password is converted on start.\n"
    "\n"
    "options:\n"
    "  --time-zone ZONE         initial server clock zone, a Windows zone name\n"
    "                           (\"UTC\", \"E. South America Standard Time\"); stored\n"
    "                           state wins on restart (default UTC)\n"
    "  --capture-poll-ms N      capture scan every N ms of real time; 0 = scans only\n"
    "                           on EXEC sim.run_capture (default 500)\n"
    "  --capture-latency-ms N   harvest transactions committed at least N ms ago\n"
    "                           (server clock; default 0)\n"
    "  --capture-maxtrans N     at most N transactions per scan (default 500)\n"
    "  --change-cache-mb N      memory for the change store: change rows kept in\n"
    "                           memory, encoded as sent, that the reader's change\n"
    "                           query is served from; a change table that would\n"
    "                           pass it is read from SQLite. 0 = off (default 2048)\n"
    "  --table-cache-mb N       memory for the table store: base tables' rows kept in\n"
    "                           memory, encoded as sent, that reads of the snapshot\n"
    "                           reader's shape are served from (built by a read of a\n"
    "                           whole table, or handed over by sim.bulk_load_table;\n"
    "                           any write drops it); a table\n"
    "                           that would pass it is read from SQLite. 0 = off\n"
    "                           (default 4096)\n"
    "  --version-major N        SERVERPROPERTY('ProductMajorVersion') and the version\n"
    "                           the server announces (default 16 = SQL Server 2022)\n"
    ;
/* the rest of the help (C17 promises string literals of 4095 bytes) */
static const char g_usage_more[] =
    "  --tls MODE               on: encrypt when the client asks and always the\n"
    "                           LOGIN7 packet, as SQL Server (default); required:\n"
    "                           the whole session always (\"force encryption\");\n"
    "                           off: no TLS at all (PRELOGIN answers NOT_SUP)\n"
    "  --tls-cert FILE          server certificate (PEM); with --tls-key. Without\n"
    "                           them a self-signed certificate for localhost and\n"
    "                           127.0.0.1 is created once as DIR/tls-cert.pem (clients\n"
    "                           then need TrustServerCertificate=yes)\n"
    "  --tls-key FILE           the certificate's private key (PEM)\n"
    "  --login-timeout-ms N     close a connection that has not logged in N ms after\n"
    "                           it was accepted (TLS handshake and LOGIN7 included);\n"
    "                           0 = never; logged-in sessions may idle (default 60000)\n"
    "  --max-pending-logins N   connections not logged in yet at once; more are closed\n"
    "                           when accepted (default 64). Before login a client may\n"
    "                           send only PRELOGIN (at most 4 KiB) and LOGIN7 (at most\n"
    "                           128 KiB); anything else is a protocol error that closes it\n"
    "  --ready-file PATH        once listening, write the port number to PATH\n"
    "  --quiet                  log errors only\n"
    "  --verbose                log connections and logins too\n"
    "  -h, --help               show this help\n"
    "\n"
    "T-SQL as SQL Server has it, on SQLite (the differences are listed at the top\n"
    "of src/sim/sim_engine.c): READ COMMITTED reads wait for writers' open\n"
    "transactions; SET TRANSACTION ISOLATION LEVEL SNAPSHOT reads the data as\n"
    "committed when the statement (or the transaction's first read) started,\n"
    "once ALTER DATABASE <db> SET ALLOW_SNAPSHOT_ISOLATION ON allows it. Tests\n"
    "drive the simulator with EXEC sim.* (README): the clock, capture, faults,\n"
    "sim.workload, sim.bulk_load (change rows), sim.bulk_load_table (a base\n"
    "table's rows).\n"
    "\n"
    "Prints \"listening on 127.0.0.1:PORT\" on stdout when ready. Stops cleanly on\n"
    "SIGINT or SIGTERM. Exit status: 0 after a clean stop, 1 on a runtime error,\n"
    "2 on bad arguments.\n";

/* Subcommands besides the server. The engine may add some (e.g. a workload
 * generator): declare `int sim_cmd_<name>(int argc, char **argv)` in
 * sim_engine.h and add a row here. argv[0] is the subcommand name. */
typedef struct subcommand {
    const char *name;
    int (*run)(int argc, char **argv);
} subcommand;
static const subcommand g_subcommands[] = {
    {NULL, NULL}, /* none yet */
};

static sim_tds_server *volatile g_server;

static void on_signal(int sig) {
    (void)sig;
    sim_tds_server *s = g_server;
    if (s) sim_tds_server_stop(s);
}

static int usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "mssql-cdc-sim: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nRun 'mssql-cdc-sim --help' for usage.\n");
    return EXIT_USAGE;
}

static int parse_int(const char *flag, const char *s, int lo, int hi, int *out) {
    int64_t v;
    if (mcdc_parse_i64(s, &v) != MCDC_OK || v < lo || v > hi) {
        fprintf(stderr, "mssql-cdc-sim: %s needs an integer from %d to %d, got '%s'\n", flag, lo,
                hi, s);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int write_ready_file(const char *path, int port) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return -1;
    fprintf(f, "%d\n", port);
    if (fclose(f) != 0) return -1;
    return rename(tmp, path);
}

/* The first line of path (without its line end) into buf; prints why not. */
static int read_password_file(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "mssql-cdc-sim: --password-file %s: %s\n", path, strerror(errno));
        return -1;
    }
    bool got = fgets(buf, (int)cap, f) != NULL;
    fclose(f);
    size_t n = got ? strlen(buf) : 0;
    if (n == cap - 1 && buf[n - 1] != '\n') {
        explicit_bzero(buf, cap);
        fprintf(stderr, "mssql-cdc-sim: --password-file %s: the password is longer than %d bytes\n", path,
                SIM_PASSWORD_BYTES_MAX);
        return -1;
    }
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) buf[--n] = 0;
    if (n == 0) {
        fprintf(stderr, "mssql-cdc-sim: --password-file %s: the first line is empty\n", path);
        return -1;
    }
    return 0;
}

static int serve(int argc, char **argv) {
    enum { O_PORT = 256, O_DATA, O_PW, O_TZ, O_POLL, O_LAT, O_MAXT, O_VER, O_READY, O_QUIET,
           O_VERBOSE, O_TLS, O_TLS_CERT, O_TLS_KEY, O_CACHE, O_PW_FILE, O_LOGIN_TIMEOUT, O_PENDING, O_TCACHE };
    static const struct option opts[] = {
        {"port", required_argument, NULL, O_PORT},
        {"data", required_argument, NULL, O_DATA},
        {"password", required_argument, NULL, O_PW},
        {"password-file", required_argument, NULL, O_PW_FILE},
        {"login-timeout-ms", required_argument, NULL, O_LOGIN_TIMEOUT},
        {"max-pending-logins", required_argument, NULL, O_PENDING},
        {"time-zone", required_argument, NULL, O_TZ},
        {"capture-poll-ms", required_argument, NULL, O_POLL},
        {"capture-latency-ms", required_argument, NULL, O_LAT},
        {"capture-maxtrans", required_argument, NULL, O_MAXT},
        {"change-cache-mb", required_argument, NULL, O_CACHE},
        {"table-cache-mb", required_argument, NULL, O_TCACHE},
        {"version-major", required_argument, NULL, O_VER},
        {"ready-file", required_argument, NULL, O_READY},
        {"tls", required_argument, NULL, O_TLS},
        {"tls-cert", required_argument, NULL, O_TLS_CERT},
        {"tls-key", required_argument, NULL, O_TLS_KEY},
        {"quiet", no_argument, NULL, O_QUIET},
        {"verbose", no_argument, NULL, O_VERBOSE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int port = -1;
    const char *ready = NULL;
    sim_tls_mode tls = SIM_TLS_ON;
    const char *tls_cert = NULL, *tls_key = NULL;
    sim_config cfg = {.time_zone = "UTC",
                      .product_major_version = 16,
                      .capture_poll_ms = 500,
                      .capture_latency_ms = 0,
                      .capture_maxtrans = 500};
    mcdc_log_level level = MCDC_LOG_WARN;
    int cache_mb = SIM_CHANGE_CACHE_MB_DEFAULT, table_mb = SIM_TABLE_CACHE_MB_DEFAULT;
    int login_timeout_ms = SIM_TDS_LOGIN_TIMEOUT_MS_DEFAULT, pending = SIM_TDS_PENDING_LOGINS_DEFAULT;
    const char *pw_file = NULL;
    char *pw_arg = NULL; /* --password's argv bytes, blanked once copied */
    char pw[SIM_PASSWORD_BYTES_MAX + 2] = "";
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case O_PORT: if (parse_int("--port", optarg, 0, 65535, &port)) return EXIT_USAGE; break;
        case O_DATA: cfg.data_dir = optarg; break;
        case O_PW: pw_arg = optarg; break;
        case O_PW_FILE: pw_file = optarg; break;
        case O_LOGIN_TIMEOUT:
            if (parse_int("--login-timeout-ms", optarg, 0, 86400000, &login_timeout_ms)) return EXIT_USAGE;
            break;
        case O_PENDING:
            if (parse_int("--max-pending-logins", optarg, 1, MCDC_SIM_SESSIONS_MAX, &pending)) return EXIT_USAGE;
            break;
        case O_TZ: cfg.time_zone = optarg; break;
        case O_POLL:
            if (parse_int("--capture-poll-ms", optarg, 0, 86400000, &cfg.capture_poll_ms))
                return EXIT_USAGE;
            break;
        case O_LAT:
            if (parse_int("--capture-latency-ms", optarg, 0, 86400000, &cfg.capture_latency_ms))
                return EXIT_USAGE;
            break;
        case O_MAXT:
            if (parse_int("--capture-maxtrans", optarg, 1, 1000000000, &cfg.capture_maxtrans))
                return EXIT_USAGE;
            break;
        case O_CACHE:
            if (parse_int("--change-cache-mb", optarg, 0, 1024 * 1024, &cache_mb)) return EXIT_USAGE;
            break;
        case O_TCACHE:
            if (parse_int("--table-cache-mb", optarg, 0, 1024 * 1024, &table_mb)) return EXIT_USAGE;
            break;
        case O_VER:
            if (parse_int("--version-major", optarg, 9, 99, &cfg.product_major_version))
                return EXIT_USAGE;
            break;
        case O_READY: ready = optarg; break;
        case O_TLS:
            if (strcmp(optarg, "on") == 0) tls = SIM_TLS_ON;
            else if (strcmp(optarg, "off") == 0) tls = SIM_TLS_OFF;
            else if (strcmp(optarg, "required") == 0) tls = SIM_TLS_REQUIRED;
            else return usage_error("--tls needs on, off or required, got '%s'", optarg);
            break;
        case O_TLS_CERT: tls_cert = optarg; break;
        case O_TLS_KEY: tls_key = optarg; break;
        case O_QUIET: level = MCDC_LOG_ERROR; break;
        case O_VERBOSE: level = MCDC_LOG_INFO; break;
        case 'h': fputs(g_usage, stdout); fputs(g_usage_more, stdout); return 0;
        case ':': return usage_error("%s needs a value", argv[optind - 1]);
        default: return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return usage_error("unexpected argument '%s'", argv[optind]);
    if (port < 0) return usage_error("%s is required", "--port");
    if (!cfg.data_dir || !cfg.data_dir[0]) return usage_error("%s is required", "--data");
    const char *env_pw = getenv(SIM_PASSWORD_ENV);
    if (pw_arg && pw_file) return usage_error("%s: give --password or --password-file, not both", "--password");
    if (pw_arg) {
        if (strlen(pw_arg) > SIM_PASSWORD_BYTES_MAX) return usage_error("%s: the password is too long", "--password");
        snprintf(pw, sizeof pw, "%s", pw_arg);
        memset(pw_arg, 'x', strlen(pw_arg)); /* out of /proc/PID/cmdline (ps) from now on */
    } else if (pw_file) {
        if (read_password_file(pw_file, pw, sizeof pw) != 0) return EXIT_USAGE;
    } else if (env_pw) {
        if (strlen(env_pw) > SIM_PASSWORD_BYTES_MAX) return usage_error("%s: the password is too long", SIM_PASSWORD_ENV);
        snprintf(pw, sizeof pw, "%s", env_pw);
    }
    if (env_pw) explicit_bzero((char *)env_pw, strlen(env_pw)); /* out of /proc/PID/environ too */
    unsetenv(SIM_PASSWORD_ENV); /* not inherited by anything this process starts */
    if (!pw[0])
        return usage_error("%s is required (the password of login 'sa'; or --password, or the environment"
                           " variable MSSQL_CDC_SIM_PASSWORD)", "--password-file");
    cfg.sa_password = pw;
    if ((tls_cert == NULL) != (tls_key == NULL))
        return usage_error("%s: give --tls-cert and --tls-key together", tls_cert ? tls_cert
                                                                                  : tls_key);
    /* The simulator's own threads log at this level (sim_log_sink). */
    g_sim_log_sink.level = level;
    mcdc_log_use(&g_sim_log_sink);

    mcdc_error err = MCDC_ERROR_INIT;
    sim_server *engine = NULL;
    int orc = sim_server_open(&engine, &cfg, &err);
    explicit_bzero(pw, sizeof pw); /* the engine keeps its hash only */
    if (orc != MCDC_OK) {
        fprintf(stderr, "mssql-cdc-sim: cannot open the server state in %s: %s\n", cfg.data_dir,
                err.message);
        return 1;
    }
    sim_server_set_change_cache_mb(engine, cache_mb);
    sim_server_set_table_cache_mb(engine, table_mb);
    sim_tds_server_config tcfg = {.host = "127.0.0.1",
                              .port = port,
                              .version_major = cfg.product_major_version,
                              .tls_mode = tls,
                              .tls_cert_file = tls_cert,
                              .tls_key_file = tls_key,
                              .tls_dir = cfg.data_dir,
                              .login_timeout_ms = login_timeout_ms > 0 ? login_timeout_ms : -1,
                              .max_pending_logins = pending};
    sim_tds_server *srv = NULL;
    if (sim_tds_server_create(&srv, engine, &tcfg, &err) != MCDC_OK) {
        fprintf(stderr, "mssql-cdc-sim: %s\n", err.message);
        sim_server_close(engine);
        return 1;
    }
    g_server = srv;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    int bound = sim_tds_server_port(srv);
    if (ready && write_ready_file(ready, bound) != 0) {
        fprintf(stderr, "mssql-cdc-sim: cannot write the ready file %s: %s\n", ready,
                strerror(errno));
        g_server = NULL;
        sim_tds_server_free(srv);
        sim_server_close(engine);
        return 1;
    }
    printf("listening on 127.0.0.1:%d\n", bound);
    fflush(stdout);
    int rc = sim_tds_server_run(srv, &err);
    g_server = NULL;
    sim_tds_server_free(srv);
    sim_server_close(engine);
    if (rc != MCDC_OK) {
        fprintf(stderr, "mssql-cdc-sim: %s\n", err.message);
        return 1;
    }
    mcdc_log(MCDC_LOG_INFO, "sim: stopped");
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && argv[1][0] != '-') {
        if (strcmp(argv[1], "serve") == 0) return serve(argc - 1, argv + 1);
        for (const subcommand *s = g_subcommands; s->name; s++)
            if (strcmp(argv[1], s->name) == 0) return s->run(argc - 1, argv + 1);
        return usage_error("unknown subcommand '%s'", argv[1]);
    }
    return serve(argc, argv);
}
