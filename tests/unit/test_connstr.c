#include "mcdc_connstr.h"
#include "mcdc_test.h"

static char g_logged[2048];
static void capture_log(void *ctx, mcdc_log_level level, const char *msg) {
    (void)ctx;
    (void)level;
    size_t n = strlen(g_logged);
    snprintf(g_logged + n, sizeof g_logged - n, "%s\n", msg);
}

TEST(connstr_parses_the_usual_string) {
    mcdc_connstr *c = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_connstr_parse(&c,
                                "Driver={ODBC Driver 18 for SQL Server};Server=tcp:db.example,"
                                "1433;Database=sales;UID=reader;PWD=s3cret;Encrypt=no;"
                                "TrustServerCertificate=yes;Connection Timeout=30;App=job-1",
                                &e);
    CHECK_EQ_INT(rc, MCDC_OK);
    if (rc != MCDC_OK) return;
    CHECK_EQ_STR(c->host, "db.example");
    CHECK_EQ_INT(c->port, 1433);
    CHECK(c->instance == NULL);
    CHECK_EQ_STR(c->database, "sales");
    CHECK_EQ_STR(c->user, "reader");
    CHECK_EQ_STR(c->password, "s3cret");
    CHECK_EQ_INT(c->encrypt, MCDC_ENCRYPT_NO);
    CHECK_EQ_INT(c->trust_server_certificate, 1);
    CHECK_EQ_INT(c->connect_timeout_s, 30);
    CHECK_EQ_STR(c->app, "job-1");
    CHECK_EQ_STR(c->driver, "ODBC Driver 18 for SQL Server");
    CHECK_EQ_STR(mcdc_connstr_freetds_encryption(c), "request");
    mcdc_connstr_free(c);
}

TEST(connstr_synonyms_case_and_spaces) {
    mcdc_connstr *c = NULL;
    CHECK_EQ_INT(mcdc_connstr_parse(&c,
                                    "  data source = myhost\\SQLEXPRESS ; INITIAL CATALOG=db1;"
                                    "User Id=u1 ;password= p w ;ENCRYPT=Mandatory;;",
                                    NULL),
                 MCDC_OK);
    if (!c) return;
    CHECK_EQ_STR(c->host, "myhost");
    CHECK_EQ_STR(c->instance, "SQLEXPRESS");
    CHECK_EQ_INT(c->port, 0);
    CHECK_EQ_STR(c->database, "db1");
    CHECK_EQ_STR(c->user, "u1");
    CHECK_EQ_STR(c->password, "p w"); /* inner spaces kept, outer trimmed */
    CHECK_EQ_INT(c->encrypt, MCDC_ENCRYPT_YES);
    CHECK_EQ_STR(mcdc_connstr_freetds_encryption(c), "require");
    CHECK_EQ_INT(c->trust_server_certificate, -1);
    mcdc_connstr_free(c);
    CHECK_EQ_INT(mcdc_connstr_parse(&c, "Addr=[::1],14330;User=x;Encrypt=strict", NULL),
                 MCDC_OK);
    if (!c) return;
    CHECK_EQ_STR(c->host, "::1");
    CHECK_EQ_INT(c->port, 14330);
    CHECK_EQ_INT(c->encrypt, MCDC_ENCRYPT_STRICT);
    mcdc_connstr_free(c);
    CHECK_EQ_INT(mcdc_connstr_parse(&c, "Server=(local);Address=h2\\i,99", NULL), MCDC_OK);
    if (!c) return;
    CHECK_EQ_STR(c->host, "h2"); /* synonym given later wins */
    CHECK_EQ_STR(c->instance, "i");
    CHECK_EQ_INT(c->port, 99);
    mcdc_connstr_free(c);
    CHECK_EQ_INT(mcdc_connstr_parse(&c, "Server=.", NULL), MCDC_OK);
    if (!c) return;
    CHECK_EQ_STR(c->host, "localhost");
    mcdc_connstr_free(c);
}

TEST(connstr_braced_values_and_escapes) {
    mcdc_connstr *c = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_connstr_parse(&c, "Server=h;PWD={a;b}}c} ;Database={ x=y };UID={}", &e),
                 MCDC_OK);
    if (!c) return;
    CHECK_EQ_STR(c->password, "a;b}c");
    CHECK_EQ_STR(c->database, " x=y ");
    CHECK_EQ_STR(c->user, "");
    char *r = mcdc_connstr_redacted(c);
    CHECK_EQ_STR(r, "Server=tcp:h;Database={ x=y };UID=;PWD={***}");
    mcdc_free(r);
    mcdc_connstr_free(c);
}

TEST(connstr_duplicates_last_wins_unknown_kept_and_warned) {
    mcdc_connstr *c = NULL;
    g_logged[0] = 0;
    mcdc_log_sink capture = {capture_log, NULL, MCDC_LOG_DEBUG};
    const mcdc_log_sink *prev = mcdc_log_use(&capture);
    int rc = mcdc_connstr_parse(&c,
                                "Server=a;Server=b,2;MultiSubnetFailover=Yes;AccessToken=tok123;"
                                "multisubnetfailover=No;Database=x;Initial Catalog=y",
                                NULL);
    mcdc_log_use(prev);
    CHECK_EQ_INT(rc, MCDC_OK);
    if (!c) return;
    CHECK_EQ_STR(c->host, "b");
    CHECK_EQ_INT(c->port, 2);
    CHECK_EQ_STR(c->database, "y");
    CHECK_EQ_INT(c->n_unknown, 2);
    CHECK_EQ_STR(c->unknown[0].key, "MultiSubnetFailover");
    CHECK_EQ_STR(c->unknown[0].value, "No");
    CHECK(strstr(g_logged, "unknown keyword 'MultiSubnetFailover'") != NULL);
    CHECK(strstr(g_logged, "AccessToken") != NULL);
    CHECK(strstr(g_logged, "tok123") == NULL);
    char *r = mcdc_connstr_redacted(c);
    CHECK_EQ_STR(r, "Server=tcp:b,2;Database=y;MultiSubnetFailover=No;AccessToken=***");
    mcdc_free(r);
    mcdc_connstr_free(c);
}

/* Every error names the keyword/position and never contains the password. */
TEST(connstr_errors_never_echo_the_password) {
    static const struct {
        const char *s;
        const char *expect;
    } cases[] = {
        {"Server=h;PWD={hunter2;UID=x", "PWD=<redacted>"},
        {"Server=h;Password={hunter2}x;UID=x", "PWD=<redacted>"},
        {"Server=h;hunter2;UID=x", "position 9 has no '='"},
        {"Server=h;=hunter2", "position 9 has no keyword"},
        {"Server=h;Encrypt={yes;PWD=hunter2}", "<value not shown>"},
        {"Server=h;Encrypt=perhaps;PWD=hunter2", "Encrypt at position 17 is 'perhaps'"},
        {"Server=h,99999;PWD=hunter2", "port '99999'"},
        {"Server=h,;PWD=hunter2", "port"},
        {"Server=h\\;PWD=hunter2", "names no instance"},
        {"PWD=hunter2;Database=d", "no Server given"},
        {"Server=h;TrustServerCertificate=maybe;PWD=hunter2", "TrustServerCertificate"},
        {"Server=h;Connection Timeout=-1;PWD=hunter2", "Connection Timeout at position 28"},
        {"Server=h;PWD=hunter2;Da{ta=1", "keyword at position 21"},
        {"Server=np:h;PWD=hunter2", "tcp:"},
        {"Server=;PWD=hunter2", "names no host"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mcdc_connstr *c = NULL;
        mcdc_error e = MCDC_ERROR_INIT;
        int rc = mcdc_connstr_parse(&c, cases[i].s, &e);
        CHECK(rc == MCDC_E_INVALID || rc == MCDC_E_UNSUPPORTED);
        CHECK(c == NULL);
        if (strstr(e.message, cases[i].expect) == NULL) {
            fprintf(stderr, "  case %zu: message '%s' lacks '%s'\n", i, e.message,
                    cases[i].expect);
            CHECK(0);
        }
        CHECK(strstr(e.message, "hunter2") == NULL);
        mcdc_connstr_free(c);
    }
}

TEST(connstr_redacted_round_trips_through_the_parser) {
    mcdc_connstr *c = NULL, *d = NULL;
    CHECK_EQ_INT(mcdc_connstr_parse(&c,
                                    "Server=h\\inst,1500;Database={we;ird}}};UID=u;PWD=x;"
                                    "Encrypt=yes;TrustServerCertificate=no;Connect Timeout=5;"
                                    "Application Name= app ",
                                    NULL),
                 MCDC_OK);
    if (!c) return;
    char *r = mcdc_connstr_redacted(c);
    CHECK_EQ_STR(r, "Server=tcp:h\\inst,1500;Database={we;ird}}};UID=u;PWD={***};Encrypt=yes;"
                    "TrustServerCertificate=no;Connection Timeout=5;App=app");
    CHECK_EQ_INT(mcdc_connstr_parse(&d, r, NULL), MCDC_OK);
    if (d) {
        CHECK_EQ_STR(d->database, c->database);
        CHECK_EQ_STR(d->instance, "inst");
        CHECK_EQ_STR(d->password, "***");
        CHECK_EQ_INT(d->connect_timeout_s, 5);
    }
    mcdc_free(r);
    mcdc_connstr_free(d);
    mcdc_connstr_free(c);
}

TEST(connstr_limits_and_allocation_failures) {
    char big[MCDC_CONNSTR_BYTES_MAX + 16];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    mcdc_connstr *c = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_connstr_parse(&c, big, &e), MCDC_E_LIMIT);
    CHECK_EQ_INT(mcdc_connstr_parse(&c, NULL, &e), MCDC_E_INVALID);
    /* Fail every allocation in turn: always a clean error or success, no leak. */
    int ok = 0, nomem = 0;
    const mcdc_log_sink *saved = mcdc_log_use(&mcdc_test_quiet);
    for (int n = 1; n < 60; n++) {
        mcdc_alloc_fail_at(n);
        int rc = mcdc_connstr_parse(&c, "Server=h,1;UID=u;PWD={p};X=1;Y=2", &e);
        mcdc_alloc_fail_at(0);
        if (rc == MCDC_OK) {
            ok++;
            mcdc_connstr_free(c);
        } else if (rc == MCDC_E_NOMEM) {
            nomem++;
        }
    }
    mcdc_log_use(saved);
    CHECK(ok > 0);
    CHECK(nomem > 0);
}
