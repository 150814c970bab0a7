#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mcdc_driver.h"
#include "mcdc_test.h"
#include "test_driver_fake.h"

static char *inline_sql(const char *sql, const char *const *p, int n, int *rc) {
    mcdc_buf b = {0};
    *rc = mcdc_sql_inline_params(&b, sql, p, n, NULL);
    if (*rc != MCDC_OK) {
        mcdc_buf_free(&b);
        return NULL;
    }
    return (char *)b.data;
}

TEST(driver_inlines_parameters_as_n_literals) {
    int rc;
    const char *p[] = {"0x0000002A000001F00003", "it's", NULL, "a?b"};
    char *s = inline_sql("SELECT CONVERT(binary(10), ?, 1), ?, ?, ?", p, 4, &rc);
    CHECK_EQ_INT(rc, MCDC_OK);
    CHECK_EQ_STR(s, "SELECT CONVERT(binary(10), N'0x0000002A000001F00003', 1), N'it''s', NULL, "
                    "N'a?b'");
    mcdc_free(s);
    /* '?' inside literals, brackets and comments is not a placeholder */
    const char *q[] = {"x"};
    s = inline_sql("SELECT '?', [a?], N'it''s ?' -- ?\n, /* ? */ ? AS \"q?\"", q, 1, &rc);
    CHECK_EQ_STR(s, "SELECT '?', [a?], N'it''s ?' -- ?\n, /* ? */ N'x' AS \"q?\"");
    mcdc_free(s);
    /* injection attempt stays inside the literal */
    const char *inj[] = {"'; DROP TABLE t; --"};
    s = inline_sql("SELECT ?", inj, 1, &rc);
    CHECK_EQ_STR(s, "SELECT N'''; DROP TABLE t; --'");
    mcdc_free(s);
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_buf b = {0};
    CHECK_EQ_INT(mcdc_sql_inline_params(&b, "SELECT ?, ?", q, 1, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "more '?'") != NULL);
    mcdc_buf_reset(&b);
    CHECK_EQ_INT(mcdc_sql_inline_params(&b, "SELECT 1", q, 1, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "0 '?' placeholders but 1") != NULL);
    mcdc_buf_free(&b);
}

TEST(driver_classifies_server_and_library_errors) {
    CHECK_EQ_INT(mcdc_driver_classify(1205, 13), MCDC_E_TRANSIENT);
    CHECK_EQ_INT(mcdc_driver_classify(40613, 17), MCDC_E_TRANSIENT);
    CHECK_EQ_INT(mcdc_driver_classify(9999, 20), MCDC_E_TRANSIENT);
    CHECK_EQ_INT(mcdc_driver_classify(18456, 14), MCDC_E_LOGIN);
    /* a disabled or locked-out login, an expired password: refused, not retried */
    CHECK_EQ_INT(mcdc_driver_classify(18470, 14), MCDC_E_LOGIN);
    CHECK_EQ_INT(mcdc_driver_classify(18486, 14), MCDC_E_LOGIN);
    CHECK_EQ_INT(mcdc_driver_classify(18487, 14), MCDC_E_LOGIN);
    CHECK_EQ_INT(mcdc_driver_classify(18488, 14), MCDC_E_LOGIN);
    CHECK_EQ_INT(mcdc_driver_classify(229, 14), MCDC_E_PERMISSION);
    CHECK_EQ_INT(mcdc_driver_classify(208, 16), MCDC_E_NOTFOUND);
    CHECK_EQ_INT(mcdc_driver_classify(22964, 16), MCDC_E_NOTFOUND);
    CHECK_EQ_INT(mcdc_driver_classify(102, 15), MCDC_E_SERVER);
    CHECK_EQ_INT(mcdc_driver_classify(8115, 16), MCDC_E_SERVER);
    CHECK_EQ_INT(mcdc_driver_classify_dblib(20003), MCDC_E_TRANSIENT); /* SYBETIME */
    CHECK_EQ_INT(mcdc_driver_classify_dblib(20004), MCDC_E_TRANSIENT); /* SYBEREAD */
    CHECK_EQ_INT(mcdc_driver_classify_dblib(20006), MCDC_E_TRANSIENT); /* SYBEWRIT */
    CHECK_EQ_INT(mcdc_driver_classify_dblib(20009), MCDC_E_TRANSIENT); /* SYBECONN */
    CHECK_EQ_INT(mcdc_driver_classify_dblib(20017), MCDC_E_TRANSIENT); /* SYBESEOF */
    CHECK_EQ_INT(mcdc_driver_classify_dblib(20014), MCDC_E_LOGIN);
    CHECK_EQ_INT(mcdc_driver_classify_dblib(20013), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_driver_classify_dblib(20020), MCDC_E_PROTOCOL);
}

TEST(driver_scalar_and_batches_over_the_seam) {
    fake_db *f = fake_new();
    fake_reply(f, "@@VERSION", "v:utf8", "16.0");
    fake_reply(f, "NULL", "x:i32", "\\N");
    fake_reply(f, "none", "x:i32", "");
    fake_reply(f, "rows", "a:i32,b:utf8,c:dec(10,2)", "1|x|1.5\n2|\\N|-2.25\n3|zz|0");
    fake_error(f, "bad", MCDC_E_NOTFOUND, 208, "Invalid object name 'nope'.");
    mcdc_conn *c = fake_connect(f);
    char *t = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_conn_scalar(&t, c, "SELECT @@VERSION", NULL, 0, &e), MCDC_OK);
    CHECK_EQ_STR(t, "16.0");
    mcdc_free(t);
    CHECK_EQ_INT(mcdc_conn_scalar(&t, c, "SELECT NULL", NULL, 0, &e), MCDC_OK);
    CHECK(t == NULL);
    CHECK_EQ_INT(mcdc_conn_scalar(&t, c, "SELECT none", NULL, 0, &e), MCDC_OK);
    CHECK(t == NULL);
    mcdc_result *r = NULL;
    CHECK_EQ_INT(mcdc_conn_exec(&r, c, "SELECT rows", NULL, 0, &e), MCDC_OK);
    const mcdc_schema *s = mcdc_result_schema(r);
    CHECK_EQ_INT(s->n_fields, 3);
    mcdc_batch *b = NULL;
    CHECK_EQ_INT(mcdc_result_next_batch(&b, r, 2, &e), MCDC_OK);
    CHECK(b != NULL && b->rows == 2);
    mcdc_batch_free(b);
    CHECK_EQ_INT(mcdc_result_next_batch(&b, r, 2, &e), MCDC_OK);
    CHECK(b != NULL && b->rows == 1);
    mcdc_batch_free(b);
    CHECK_EQ_INT(mcdc_result_next_batch(&b, r, 2, &e), MCDC_OK);
    CHECK(b == NULL);
    mcdc_result_free(r);
    CHECK_EQ_INT(mcdc_conn_scalar(&t, c, "SELECT * FROM bad", NULL, 0, &e), MCDC_E_NOTFOUND);
    CHECK_EQ_INT(e.server_number, 208);
    CHECK_EQ_INT(fake_exec_count(f), 5);
    mcdc_conn_close(c);
    fake_free(f);
}

/* FreeTDS against a port nobody listens on (bound here, never listened
 * to): a transient error naming the address, never the password, and no
 * exit() from db-lib. */
TEST(driver_freetds_refused_connection_is_transient) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
          getsockname(fd, (struct sockaddr *)&a, &alen) == 0);
    char text[160], where[64];
    snprintf(where, sizeof where, "127.0.0.1:%d", ntohs(a.sin_port));
    snprintf(text, sizeof text, "Server=127.0.0.1,%d;UID=sa;PWD=Secr3t!x;Connection Timeout=2",
             ntohs(a.sin_port));
    mcdc_connstr *cs = NULL;
    CHECK_EQ_INT(mcdc_connstr_parse(&cs, text, NULL), MCDC_OK);
    if (cs) {
        mcdc_conn *c = NULL;
        mcdc_error e = MCDC_ERROR_INIT;
        int rc = mcdc_conn_open(&c, cs, NULL, &e);
        CHECK_EQ_INT(rc, MCDC_E_TRANSIENT);
        CHECK(c == NULL);
        CHECK(strstr(e.message, where) != NULL);
        CHECK(strstr(e.message, "Secr3t") == NULL);
        mcdc_connstr_free(cs);
    }
    if (fd >= 0) close(fd);
}
