/* test_tds_tls.c - TLS over TDS: the PRELOGIN encryption tables of the
 * simulator and of our client, and real handshakes between the two over a
 * socket pair (LOGIN7-only, full, TDS 8.0 strict, refused). */
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mcdc_connstr.h"
#include "mcdc_tds_proto.h"
#include "mcdc_tds_tls.h"
#include "mcdc_test.h"
#include "tds_tls.h"
#include "tds_wire.h"

/* ---- the tables ------------------------------------------------------------ */
TEST(sim_tls_negotiate_table) {
    /* rows: client OFF, ON, NOT_SUP, REQ, absent, ON + client-cert bit */
    static const int client[6] = {0, 1, 2, 3, -1, 0x21};
    static const int want[3][6] = {
        /* off      */ {2, 2, 2, 2, 2, 2},
        /* on       */ {0, 1, 2, 1, 2, 1},
        /* required */ {3, 1, 3, 1, 3, 1},
    };
    for (int m = 0; m < 3; m++)
        for (int k = 0; k < 6; k++)
            CHECK_EQ_INT(sim_tls_negotiate((sim_tls_mode)m, client[k]), want[m][k]);
}

TEST(sim_tls_after_prelogin_table) {
    CHECK_EQ_INT(sim_tls_after_prelogin(0, 0), SIM_TLS_AFTER_LOGIN_ONLY);
    CHECK_EQ_INT(sim_tls_after_prelogin(1, 1), SIM_TLS_AFTER_FULL);
    CHECK_EQ_INT(sim_tls_after_prelogin(3, 1), SIM_TLS_AFTER_FULL);
    CHECK_EQ_INT(sim_tls_after_prelogin(0, 3), SIM_TLS_AFTER_FULL);
    CHECK_EQ_INT(sim_tls_after_prelogin(2, 3), SIM_TLS_AFTER_REFUSE);
    CHECK_EQ_INT(sim_tls_after_prelogin(-1, 3), SIM_TLS_AFTER_REFUSE);
    CHECK_EQ_INT(sim_tls_after_prelogin(2, 2), SIM_TLS_AFTER_PLAIN);
    CHECK_EQ_INT(sim_tls_after_prelogin(1, 2), SIM_TLS_AFTER_PLAIN);
}

TEST(tds_tls_client_table) {
    mcdc_tds_tls_params opt = {0}, req = {.require = true}, strict = {.strict = true};
    CHECK_EQ_INT(mcdc_tds_tls_client_byte(&opt), TDS_ENCRYPT_OFF);
    CHECK_EQ_INT(mcdc_tds_tls_client_byte(&req), TDS_ENCRYPT_ON);
    CHECK_EQ_INT(mcdc_tds_tls_client_byte(&strict), TDS_ENCRYPT_ON);
    CHECK_EQ_INT(mcdc_tds_tls_decide(&opt, TDS_ENCRYPT_OFF), MCDC_TDS_TLS_LOGIN_ONLY);
    CHECK_EQ_INT(mcdc_tds_tls_decide(&opt, TDS_ENCRYPT_NOT_SUP), MCDC_TDS_TLS_NONE);
    CHECK_EQ_INT(mcdc_tds_tls_decide(&opt, TDS_ENCRYPT_REQ), MCDC_TDS_TLS_FULL);
    CHECK_EQ_INT(mcdc_tds_tls_decide(&opt, -1), MCDC_TDS_TLS_NONE);
    CHECK_EQ_INT(mcdc_tds_tls_decide(&req, TDS_ENCRYPT_ON), MCDC_TDS_TLS_FULL);
    CHECK_EQ_INT(mcdc_tds_tls_decide(&req, TDS_ENCRYPT_REQ), MCDC_TDS_TLS_FULL);
    CHECK_EQ_INT(mcdc_tds_tls_decide(&req, TDS_ENCRYPT_NOT_SUP), MCDC_TDS_TLS_REFUSED);
    CHECK_EQ_INT(mcdc_tds_tls_decide(&req, TDS_ENCRYPT_OFF), MCDC_TDS_TLS_REFUSED);
}

/* Both sides of every pairing reach the same plan. */
TEST(tds_tls_client_and_sim_agree) {
    mcdc_tds_tls_params ps[2] = {{0}, {.require = true}};
    for (int m = 0; m < 3; m++)
        for (int p = 0; p < 2; p++) {
            int cb = mcdc_tds_tls_client_byte(&ps[p]);
            int sb = sim_tls_negotiate((sim_tls_mode)m, cb);
            mcdc_tds_tls_plan c = mcdc_tds_tls_decide(&ps[p], sb);
            sim_tls_after s = sim_tls_after_prelogin(cb, sb);
            int cs = c == MCDC_TDS_TLS_NONE         ? SIM_TLS_AFTER_PLAIN
                     : c == MCDC_TDS_TLS_LOGIN_ONLY ? SIM_TLS_AFTER_LOGIN_ONLY
                     : c == MCDC_TDS_TLS_FULL       ? SIM_TLS_AFTER_FULL
                                                    : -1;
            if (c == MCDC_TDS_TLS_REFUSED) CHECK(m == SIM_TLS_OFF && ps[p].require);
            else CHECK_EQ_INT(cs, s);
        }
}

/* The byte we put in PRELOGIN is the one the simulator reads. */
TEST(tds_tls_prelogin_byte_round_trip) {
    for (int b = 0; b < 4; b++) {
        mcdc_buf m = {0};
        mcdc_error e = MCDC_ERROR_INIT;
        CHECK_EQ_INT(mcdc_tds_build_prelogin(&m, b, &e), MCDC_OK);
        sim_tds_prelogin pl;
        CHECK_EQ_INT(sim_tds_prelogin_parse(&pl, m.data, m.len, &e), MCDC_OK);
        CHECK_EQ_INT(pl.encryption, b);
        mcdc_buf_free(&m);
    }
}

/* ---- handshakes over a socket pair ------------------------------------------ */
typedef struct server_side {
    int fd;
    sim_tls_ctx *ctx;
    sim_tls_mode mode;
    sim_tls_conn *tls;
    bool tls_on;
    char got[64];    /* the "LOGIN7" payload the server read */
    int after;       /* sim_tls_after, or 9 for strict */
    int ok;
} server_side;

static int srv_read(void *ctx, uint8_t *p, size_t n) {
    server_side *s = ctx;
    if (s->tls_on) return sim_tls_read(s->tls, p, n);
    while (n) {
        ssize_t k = recv(s->fd, p, n, 0);
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int srv_raw_write(void *ctx, const uint8_t *p, size_t n) {
    server_side *s = ctx;
    return send(s->fd, p, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

static int srv_write(void *ctx, const uint8_t *p, size_t n) {
    server_side *s = ctx;
    return s->tls_on ? sim_tls_write(s->tls, p, n) : srv_raw_write(ctx, p, n);
}

static void *server_main(void *arg) {
    server_side *s = arg;
    mcdc_error e = MCDC_ERROR_INIT;
    sim_tds_msg msg = {0};
    sim_tds_out out;
    if (sim_tds_out_init(&out, srv_write, s, &e) != MCDC_OK) return NULL;
    uint8_t first = 0;
    if (recv(s->fd, &first, 1, MSG_PEEK) == 1 && first == 0x16) {
        if (sim_tls_conn_create(&s->tls, s->ctx, s->fd, srv_raw_write, s, &e) ||
            sim_tls_handshake(s->tls, false, &e))
            goto done;
        s->tls_on = true;
        s->after = 9;
    }
    if (sim_tds_msg_read(&msg, srv_read, s, &e) || msg.type != 0x12) goto done;
    sim_tds_prelogin pl;
    if (sim_tds_prelogin_parse(&pl, msg.payload.data, msg.payload.len, &e)) goto done;
    int enc = sim_tls_negotiate(s->mode, pl.encryption);
    if (sim_tds_prelogin_reply(&out, 16, enc)) goto done;
    if (s->after != 9) {
        s->after = (int)sim_tls_after_prelogin(pl.encryption, enc);
        if (s->after == SIM_TLS_AFTER_REFUSE) goto done;
        if (s->after != SIM_TLS_AFTER_PLAIN) {
            if (sim_tls_conn_create(&s->tls, s->ctx, s->fd, srv_raw_write, s, &e) ||
                sim_tls_handshake(s->tls, true, &e))
                goto done;
            s->tls_on = true;
        }
    }
    if (sim_tds_msg_read(&msg, srv_read, s, &e) || msg.type != 0x10) goto done;
    snprintf(s->got, sizeof s->got, "%.*s", (int)msg.payload.len, (const char *)msg.payload.data);
    if (s->after == SIM_TLS_AFTER_LOGIN_ONLY) s->tls_on = false;
    sim_tds_out_begin(&out, 0x04);
    if (sim_tds_out_bytes(&out, "reply", 5) || sim_tds_out_end(&out)) goto done;
    s->ok = 1;
done:
    if (!s->ok && e.code && getenv("TLS_TEST_VERBOSE")) fprintf(stderr, "  [server: %s]\n", e.message);
    sim_tds_msg_free(&msg);
    sim_tds_out_free(&out);
    sim_tls_conn_free(s->tls);
    s->tls = NULL;
    shutdown(s->fd, SHUT_RDWR);
    close(s->fd);
    return NULL;
}

/* One connection: returns the client's status; *reply gets the reply text. */
static int connect_once(sim_tls_ctx *ctx, sim_tls_mode mode, const mcdc_tds_tls_params *tp,
                        server_side *srv, char reply[16], mcdc_error *e) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return -100;
    *srv = (server_side){.fd = sv[1], .ctx = ctx, .mode = mode, .after = -1};
    pthread_t th;
    pthread_create(&th, NULL, server_main, srv);
    mcdc_tds_stream s;
    int rc = mcdc_tds_stream_init(&s, sv[0], NULL, 0, e);
    s.deadline_us = mcdc_monotonic_us() + 10 * 1000000;
    if (rc == MCDC_OK) rc = mcdc_tds_prelogin_exchange(&s, tp, "test-server", e);
    bool tls_during_login = s.tls != NULL;
    if (rc == MCDC_OK) rc = mcdc_tds_send(&s, 0x10, (const uint8_t *)"pw-login7", 9, e);
    bool tls_after_login = s.tls != NULL;
    reply[0] = 0;
    if (rc == MCDC_OK) {
        mcdc_tds_begin_reply(&s);
        rc = mcdc_tds_need(&s, 5, e);
        if (rc == MCDC_OK) snprintf(reply, 16, "%.5s", (const char *)s.buf + s.pos);
    }
    if (rc == MCDC_OK && tls_during_login != (srv->after != SIM_TLS_AFTER_PLAIN)) rc = -101;
    if (rc == MCDC_OK && tls_after_login != (srv->after == SIM_TLS_AFTER_FULL || srv->after == 9))
        rc = -102;
    mcdc_tds_stream_free(&s);
    pthread_join(th, NULL);
    return rc;
}

TEST(tds_tls_handshakes_with_the_sim) {
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/tlstest-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    sim_tls_ctx *ctx = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(sim_tls_ctx_create(&ctx, NULL, NULL, dir, &e), MCDC_OK);
    if (ctx == NULL) return;
    server_side srv;
    char reply[16];
    mcdc_tds_tls_params optional = {.trust_server_certificate = true, .host_name = "localhost"};
    mcdc_tds_tls_params require = {.require = true, .trust_server_certificate = true,
                                   .host_name = "localhost"};
    mcdc_tds_tls_params strict = {.strict = true, .trust_server_certificate = true,
                                  .host_name = "localhost"};
    /* Encrypt=no against TLS on: LOGIN7 alone through TLS, then plaintext */
    CHECK_EQ_INT(connect_once(ctx, SIM_TLS_ON, &optional, &srv, reply, &e), MCDC_OK);
    CHECK_EQ_INT(srv.after, SIM_TLS_AFTER_LOGIN_ONLY);
    CHECK_EQ_STR(srv.got, "pw-login7");
    CHECK_EQ_STR(reply, "reply");
    /* Encrypt=yes: everything through TLS */
    CHECK_EQ_INT(connect_once(ctx, SIM_TLS_ON, &require, &srv, reply, &e), MCDC_OK);
    CHECK_EQ_INT(srv.after, SIM_TLS_AFTER_FULL);
    CHECK_EQ_STR(srv.got, "pw-login7");
    CHECK_EQ_STR(reply, "reply");
    /* Encrypt=no against a server forcing encryption: full TLS */
    CHECK_EQ_INT(connect_once(ctx, SIM_TLS_REQUIRED, &optional, &srv, reply, &e), MCDC_OK);
    CHECK_EQ_INT(srv.after, SIM_TLS_AFTER_FULL);
    CHECK_EQ_STR(reply, "reply");
    /* Encrypt=strict: TLS before PRELOGIN */
    CHECK_EQ_INT(connect_once(ctx, SIM_TLS_ON, &strict, &srv, reply, &e), MCDC_OK);
    CHECK_EQ_INT(srv.after, 9);
    CHECK_EQ_STR(reply, "reply");
    /* Encrypt=no against --tls off: plaintext */
    CHECK_EQ_INT(connect_once(ctx, SIM_TLS_OFF, &optional, &srv, reply, &e), MCDC_OK);
    CHECK_EQ_INT(srv.after, SIM_TLS_AFTER_PLAIN);
    CHECK_EQ_STR(reply, "reply");
    /* Encrypt=yes against --tls off: refused, saying what to do */
    CHECK_EQ_INT(connect_once(ctx, SIM_TLS_OFF, &require, &srv, reply, &e), MCDC_E_UNSUPPORTED);
    CHECK(strstr(e.message, "does not support encryption") != NULL);
    CHECK(strstr(e.message, "Encrypt=no") != NULL);
    /* Encrypt=yes without trusting the self-signed certificate */
    e = (mcdc_error)MCDC_ERROR_INIT;
    mcdc_tds_tls_params check = {.require = true, .host_name = "localhost"};
    CHECK_EQ_INT(connect_once(ctx, SIM_TLS_ON, &check, &srv, reply, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "not trusted") != NULL);
    CHECK(strstr(e.message, "TrustServerCertificate=yes") != NULL);
    CHECK(strstr(e.message, "test-server") != NULL);
    /* validated against the certificate itself (ServerCertificate): by
     * DNS name and by IP address, and a wrong name is refused */
    char path[128], cmd[256];
    snprintf(path, sizeof path, "%s/tls-cert.pem", dir);
    mcdc_tds_tls_params pinned = {.require = true, .host_name = "localhost", .trust_file = path};
    CHECK_EQ_INT(connect_once(ctx, SIM_TLS_ON, &pinned, &srv, reply, &e), MCDC_OK);
    CHECK_EQ_STR(reply, "reply");
    pinned.host_name = "127.0.0.1";
    CHECK_EQ_INT(connect_once(ctx, SIM_TLS_ON, &pinned, &srv, reply, &e), MCDC_OK);
    pinned.strict = true;
    CHECK_EQ_INT(connect_once(ctx, SIM_TLS_ON, &pinned, &srv, reply, &e), MCDC_OK);
    pinned.host_name = "db.example.com";
    CHECK_EQ_INT(connect_once(ctx, SIM_TLS_ON, &pinned, &srv, reply, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "HostNameInCertificate") != NULL);
    pinned.trust_file = "/nonexistent/cert.pem";
    CHECK_EQ_INT(connect_once(ctx, SIM_TLS_ON, &pinned, &srv, reply, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "ServerCertificate") != NULL);
    sim_tls_ctx_free(ctx);
    /* the certificate is kept: a second start reuses the same files */
    FILE *f = fopen(path, "rb");
    char pem1[2048] = "", pem2[2048] = "";
    CHECK(f != NULL);
    if (f) {
        CHECK(fread(pem1, 1, sizeof pem1 - 1, f) > 100);
        fclose(f);
    }
    CHECK_EQ_INT(sim_tls_ctx_create(&ctx, NULL, NULL, dir, &e), MCDC_OK);
    sim_tls_ctx_free(ctx);
    f = fopen(path, "rb");
    if (f) {
        CHECK(fread(pem2, 1, sizeof pem2 - 1, f) > 100);
        fclose(f);
    }
    CHECK(strcmp(pem1, pem2) == 0);
    /* a certificate without its key is refused */
    ctx = NULL;
    CHECK_EQ_INT(sim_tls_ctx_create(&ctx, path, NULL, dir, &e), MCDC_E_INVALID);
    CHECK(ctx == NULL);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK_EQ_INT(system(cmd), 0);
}

/* The TLS keywords of the connection string. */
TEST(tds_tls_connstr_keywords) {
    mcdc_connstr *cs = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_connstr_parse(&cs,
                                    "Server=tcp:db1,1433;PWD=s3cret;Encrypt=mandatory;"
                                    "Trust Server Certificate=no;Host Name In Certificate=db.example;"
                                    "ServerCertificate=/etc/db.pem",
                                    &e),
                 MCDC_OK);
    if (cs == NULL) return;
    CHECK_EQ_INT(cs->encrypt, MCDC_ENCRYPT_YES);
    CHECK_EQ_INT(cs->trust_server_certificate, 0);
    CHECK_EQ_STR(cs->host_name_in_certificate, "db.example");
    CHECK_EQ_STR(cs->server_certificate, "/etc/db.pem");
    char *r = mcdc_connstr_redacted(cs);
    CHECK(r != NULL && strstr(r, "HostNameInCertificate=db.example") != NULL);
    CHECK(r != NULL && strstr(r, "ServerCertificate=/etc/db.pem") != NULL);
    CHECK(r != NULL && strstr(r, "s3cret") == NULL);
    mcdc_free(r);
    mcdc_connstr_free(cs);
}
