/*
 * tds_tls.c - the simulator's TLS (GnuTLS), server side. See tds_tls.h.
 *
 * The GnuTLS transport is ours: during a TDS 7.x handshake its output is
 * collected and sent as PRELOGIN packets, and its input is the payload of
 * the client's PRELOGIN packets; afterwards (and for TDS 8.0 from the first
 * byte) records go straight to and from the socket. Decrypted bytes land in
 * one buffer per connection, so exact-size reads of headers and payloads
 * cost one record decryption, not one per read.
 */
#include "tds_tls.h"

#include "mcdc_tds_consts.h"

#include <errno.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A TLS record carries at most 16 KiB of plaintext. */
#define TLS_PLAIN_BYTES 16384
/* Handshake packets use the pre-login packet size. */
#define TLS_HS_PACKET_BYTES 4096
/* A handshake flight larger than this is not a TLS handshake. */
#define TLS_HS_FLIGHT_BYTES_MAX (256u * 1024u)
/* The generated certificate's lifetime. */
#define TLS_CERT_DAYS 3650

/* ---- negotiation ------------------------------------------------------------- */
int sim_tls_negotiate(sim_tls_mode mode, int client_encryption) {
    enum { OFF = 0, ON = 1, NOT_SUP = 2, REQ = 3 };
    if (mode == SIM_TLS_OFF) return NOT_SUP;
    int c = client_encryption < 0 ? NOT_SUP : (client_encryption & 0x0F);
    if (c == ON || c == REQ) return ON;
    if (mode == SIM_TLS_REQUIRED) return REQ;
    return c == OFF ? OFF : NOT_SUP;
}

sim_tls_after sim_tls_after_prelogin(int client_encryption, int server_encryption) {
    int c = client_encryption < 0 ? 2 : (client_encryption & 0x0F);
    switch (server_encryption) {
    case 0: return SIM_TLS_AFTER_LOGIN_ONLY;
    case 1: return SIM_TLS_AFTER_FULL;
    case 3: return c == 0 ? SIM_TLS_AFTER_FULL : SIM_TLS_AFTER_REFUSE;
    default: return SIM_TLS_AFTER_PLAIN;
    }
}

/* ---- credentials --------------------------------------------------------------- */
struct sim_tls_ctx {
    gnutls_certificate_credentials_t cred;
    gnutls_priority_t prio_wrapped; /* TDS 7.x: TLS 1.2, as SQL Server */
    gnutls_priority_t prio_strict;  /* TDS 8.0: TLS 1.2 or 1.3 */
};

static int tls_fail(mcdc_error *err, int grc, const char *what) {
    return mcdc_error_set(err, MCDC_E_IO, "TLS: %s: %s", what, gnutls_strerror(grc));
}

static int write_file(const char *path, const gnutls_datum_t *d, mode_t mode, mcdc_error *err) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return mcdc_error_set(err, MCDC_E_IO, "cannot write %s: %s", tmp, strerror(errno));
    bool ok = write(fd, d->data, d->size) == (ssize_t)d->size;
    ok = (fsync(fd) == 0) && ok;
    ok = (close(fd) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return mcdc_error_set(err, MCDC_E_IO, "cannot write %s: %s", path, strerror(e));
    }
    return MCDC_OK;
}

/* A self-signed ECDSA P-256 certificate for localhost, written as PEM. */
static int generate_cert(const char *cert_path, const char *key_path, mcdc_error *err) {
    gnutls_x509_privkey_t key = NULL;
    gnutls_x509_crt_t crt = NULL;
    gnutls_datum_t kpem = {NULL, 0}, cpem = {NULL, 0};
    int rc = MCDC_OK, g;
    const char *what = "creating the certificate";
    if ((g = gnutls_x509_privkey_init(&key)) < 0 ||
        (g = gnutls_x509_privkey_generate(key, GNUTLS_PK_ECDSA,
                                          GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0)) <
            0) {
        what = "generating the private key";
        goto fail;
    }
    if ((g = gnutls_x509_crt_init(&crt)) < 0) goto fail;
    uint8_t serial[16];
    if ((g = gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof serial)) < 0) goto fail;
    serial[0] &= 0x7F; /* a positive INTEGER */
    time_t now = time(NULL);
    static const uint8_t ip4[4] = {127, 0, 0, 1};
    if ((g = gnutls_x509_crt_set_version(crt, 3)) < 0 ||
        (g = gnutls_x509_crt_set_serial(crt, serial, sizeof serial)) < 0 ||
        (g = gnutls_x509_crt_set_activation_time(crt, now - 3600)) < 0 ||
        (g = gnutls_x509_crt_set_expiration_time(crt, now + (time_t)TLS_CERT_DAYS * 86400)) < 0 ||
        (g = gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, "localhost",
                                           9)) < 0 ||
        (g = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, "localhost", 9,
                                                  GNUTLS_FSAN_APPEND)) < 0 ||
        (g = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, ip4, 4,
                                                  GNUTLS_FSAN_APPEND)) < 0 ||
        (g = gnutls_x509_crt_set_key(crt, key)) < 0 ||
        (g = gnutls_x509_crt_set_basic_constraints(crt, 0, -1)) < 0 ||
        (g = gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE)) < 0 ||
        (g = gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_SERVER, 0)) < 0 ||
        (g = gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0)) < 0)
        goto fail;
    if ((g = gnutls_x509_privkey_export2(key, GNUTLS_X509_FMT_PEM, &kpem)) < 0 ||
        (g = gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &cpem)) < 0)
        goto fail;
    rc = write_file(key_path, &kpem, 0600, err);
    if (rc == MCDC_OK) rc = write_file(cert_path, &cpem, 0644, err);
    goto done;
fail:
    rc = tls_fail(err, g, what);
done:
    if (kpem.data) {
        memset(kpem.data, 0, kpem.size);
        gnutls_free(kpem.data);
    }
    gnutls_free(cpem.data);
    gnutls_x509_crt_deinit(crt);
    gnutls_x509_privkey_deinit(key);
    return rc;
}

int sim_tls_ctx_create(sim_tls_ctx **out, const char *cert_file, const char *key_file,
                       const char *dir, mcdc_error *err) {
    *out = NULL;
    if ((cert_file == NULL) != (key_file == NULL))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "TLS: give both a certificate and its private key, or neither "
                              "(a self-signed certificate is then created)");
    char cpath[4096], kpath[4096];
    if (cert_file == NULL) {
        MCDC_ASSERT(dir != NULL);
        snprintf(cpath, sizeof cpath, "%s/tls-cert.pem", dir);
        snprintf(kpath, sizeof kpath, "%s/tls-key.pem", dir);
        if (access(cpath, R_OK) != 0 || access(kpath, R_OK) != 0) {
            if (mkdir(dir, 0700) != 0 && errno != EEXIST)
                return mcdc_error_set(err, MCDC_E_IO, "cannot create %s for the TLS "
                                      "certificate: %s", dir, strerror(errno));
            int rc = generate_cert(cpath, kpath, err);
            if (rc != MCDC_OK) return rc;
            mcdc_log(MCDC_LOG_INFO, "sim: created a self-signed TLS certificate for localhost: %s",
                     cpath);
        }
        cert_file = cpath;
        key_file = kpath;
    }
    int g = gnutls_global_init();
    if (g < 0) return tls_fail(err, g, "initialising GnuTLS");
    sim_tls_ctx *c = mcdc_calloc(1, sizeof *c);
    if (c == NULL) {
        gnutls_global_deinit();
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory for TLS credentials");
    }
    *out = c;
    if ((g = gnutls_certificate_allocate_credentials(&c->cred)) < 0) {
        sim_tls_ctx_free(c);
        *out = NULL;
        return tls_fail(err, g, "allocating credentials");
    }
    g = gnutls_certificate_set_x509_key_file(c->cred, cert_file, key_file, GNUTLS_X509_FMT_PEM);
    if (g < 0) {
        sim_tls_ctx_free(c);
        *out = NULL;
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "TLS: cannot load the certificate %s with key %s (PEM files "
                              "expected): %s",
                              cert_file, key_file, gnutls_strerror(g));
    }
    const char *pos = NULL;
    if ((g = gnutls_priority_init(&c->prio_wrapped, "NORMAL:-VERS-ALL:+VERS-TLS1.2", &pos)) < 0 ||
        (g = gnutls_priority_init(&c->prio_strict, "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2",
                                  &pos)) < 0) {
        sim_tls_ctx_free(c);
        *out = NULL;
        return tls_fail(err, g, "setting the TLS priorities");
    }
    return MCDC_OK;
}

void sim_tls_ctx_free(sim_tls_ctx *c) {
    if (c == NULL) return;
    if (c->prio_wrapped) gnutls_priority_deinit(c->prio_wrapped);
    if (c->prio_strict) gnutls_priority_deinit(c->prio_strict);
    if (c->cred) gnutls_certificate_free_credentials(c->cred);
    mcdc_free(c);
    gnutls_global_deinit();
}

/* ---- sessions ------------------------------------------------------------------- */
struct sim_tls_conn {
    sim_tls_ctx *ctx;
    gnutls_session_t s;
    int fd;
    sim_tls_raw_write_fn write;
    void *wctx;
    bool wrapped;       /* handshake in progress inside PRELOGIN packets */
    bool nonblock;      /* pull must not wait (sim_tls_peek) */
    mcdc_buf hs_out;    /* handshake bytes waiting to go out in PRELOGIN packets */
    size_t hs_left;     /* payload bytes left in the client's current PRELOGIN packet */
    bool hs_eom;        /* that packet ends its message */
    uint8_t hs_packet_id;
    uint8_t plain[TLS_PLAIN_BYTES]; /* decrypted, not yet consumed: [pos, len) */
    size_t pos, len;
};

static int recv_exact(int fd, uint8_t *p, size_t n) {
    while (n) {
        ssize_t k = recv(fd, p, n, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Sends the collected handshake bytes as one PRELOGIN message. */
static int hs_flush(sim_tls_conn *t) {
    size_t off = 0, n = t->hs_out.len;
    const size_t room = TLS_HS_PACKET_BYTES - TDS_HEADER_BYTES;
    uint8_t pkt[TLS_HS_PACKET_BYTES];
    while (off < n) {
        size_t k = n - off < room ? n - off : room;
        size_t plen = k + TDS_HEADER_BYTES;
        pkt[0] = TDS_PKT_PRELOGIN;
        pkt[1] = off + k == n ? 1 : 0; /* EOM on the last packet of the flight */
        pkt[2] = (uint8_t)(plen >> 8);
        pkt[3] = (uint8_t)plen;
        pkt[4] = pkt[5] = 0;
        pkt[6] = t->hs_packet_id++;
        pkt[7] = 0;
        memcpy(pkt + TDS_HEADER_BYTES, t->hs_out.data + off, k);
        if (t->write(t->wctx, pkt, plen) != 0) return -1;
        off += k;
    }
    mcdc_buf_reset(&t->hs_out);
    return 0;
}

static ssize_t tls_push(gnutls_transport_ptr_t ptr, const void *p, size_t n) {
    sim_tls_conn *t = ptr;
    if (t->wrapped) {
        mcdc_error e = MCDC_ERROR_INIT;
        if (t->hs_out.len + n > TLS_HS_FLIGHT_BYTES_MAX || mcdc_buf_append(&t->hs_out, p, n, &e)) {
            gnutls_transport_set_errno(t->s, ENOMEM);
            return -1;
        }
        return (ssize_t)n;
    }
    if (t->write(t->wctx, p, n) != 0) {
        gnutls_transport_set_errno(t->s, EPIPE);
        return -1;
    }
    return (ssize_t)n;
}

static ssize_t tls_pull(gnutls_transport_ptr_t ptr, void *p, size_t n) {
    sim_tls_conn *t = ptr;
    if (t->wrapped) {
        /* our flight is complete when GnuTLS waits for the client's */
        if (t->hs_out.len && hs_flush(t) != 0) {
            gnutls_transport_set_errno(t->s, EPIPE);
            return -1;
        }
        while (t->hs_left == 0) {
            uint8_t h[TDS_HEADER_BYTES];
            if (recv_exact(t->fd, h, sizeof h) != 0) return 0;
            size_t len = (size_t)((h[2] << 8) | h[3]);
            if (h[0] != TDS_PKT_PRELOGIN || len < TDS_HEADER_BYTES) {
                mcdc_log(MCDC_LOG_WARN,
                         "sim: TLS handshake: the client sent a packet of type 0x%02x instead "
                         "of a PRELOGIN packet carrying TLS (it agreed to encrypt)",
                         h[0]);
                gnutls_transport_set_errno(t->s, EPROTO);
                return -1;
            }
            t->hs_left = len - TDS_HEADER_BYTES;
            t->hs_eom = (h[1] & 1) != 0;
        }
        size_t k = n < t->hs_left ? n : t->hs_left;
        ssize_t r;
        do r = recv(t->fd, p, k, 0);
        while (r < 0 && errno == EINTR);
        if (r <= 0) return r;
        t->hs_left -= (size_t)r;
        return r;
    }
    for (;;) {
        ssize_t r = recv(t->fd, p, n, t->nonblock ? MSG_DONTWAIT : 0);
        if (r >= 0) return r;
        if (errno == EINTR) continue;
        gnutls_transport_set_errno(t->s, errno);
        return -1;
    }
}

/* GnuTLS waits here (handshake timeout) before it pulls: our flight must be
 * out first, or both sides wait. */
static int tls_pull_timeout(gnutls_transport_ptr_t ptr, unsigned int ms) {
    sim_tls_conn *t = ptr;
    if (t->wrapped && (t->hs_left > 0 || (t->hs_out.len && hs_flush(t) != 0))) return 1;
    struct pollfd pf = {t->fd, POLLIN, 0};
    int r;
    do r = poll(&pf, 1, ms == GNUTLS_INDEFINITE_TIMEOUT ? -1 : (int)ms);
    while (r < 0 && errno == EINTR);
    return r > 0 ? 1 : r;
}

int sim_tls_conn_create(sim_tls_conn **out, sim_tls_ctx *ctx, int fd, sim_tls_raw_write_fn w,
                        void *wctx, mcdc_error *err) {
    *out = NULL;
    sim_tls_conn *t = mcdc_calloc(1, sizeof *t);
    if (t == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory for a TLS session");
    t->ctx = ctx;
    t->fd = fd;
    t->write = w;
    t->wctx = wctx;
    t->hs_packet_id = 1;
    /* no session tickets: nothing may follow the handshake that the client
     * would have to read as TLS while it still expects TDS */
    int g = gnutls_init(&t->s, GNUTLS_SERVER | GNUTLS_NO_TICKETS);
    if (g < 0) {
        mcdc_free(t);
        return tls_fail(err, g, "starting a session");
    }
    if ((g = gnutls_credentials_set(t->s, GNUTLS_CRD_CERTIFICATE, ctx->cred)) < 0) {
        sim_tls_conn_free(t);
        return tls_fail(err, g, "setting the credentials");
    }
    gnutls_certificate_server_set_request(t->s, GNUTLS_CERT_IGNORE);
    gnutls_transport_set_ptr(t->s, t);
    gnutls_transport_set_push_function(t->s, tls_push);
    gnutls_transport_set_pull_function(t->s, tls_pull);
    gnutls_transport_set_pull_timeout_function(t->s, tls_pull_timeout);
    gnutls_handshake_set_timeout(t->s, 30000);
    *out = t;
    return MCDC_OK;
}

void sim_tls_conn_free(sim_tls_conn *t) {
    if (t == NULL) return;
    if (t->s) gnutls_deinit(t->s);
    mcdc_buf_free(&t->hs_out);
    memset(t->plain, 0, sizeof t->plain);
    mcdc_free(t);
}

int sim_tls_handshake(sim_tls_conn *t, bool wrapped, mcdc_error *err) {
    int g = gnutls_priority_set(t->s, wrapped ? t->ctx->prio_wrapped : t->ctx->prio_strict);
    if (g < 0) return tls_fail(err, g, "setting the priorities");
    if (!wrapped) {
        static const gnutls_datum_t alpn = {(unsigned char *)"tds/8.0", 7};
        gnutls_alpn_set_protocols(t->s, &alpn, 1, 0);
    }
    t->wrapped = wrapped;
    do g = gnutls_handshake(t->s);
    while (g < 0 && !gnutls_error_is_fatal(g));
    if (g == 0 && wrapped && t->hs_out.len && hs_flush(t) != 0) g = GNUTLS_E_PUSH_ERROR;
    t->wrapped = false;
    if (g < 0) {
        if (g == GNUTLS_E_PREMATURE_TERMINATION || g == GNUTLS_E_PULL_ERROR)
            return mcdc_error_set(err, MCDC_E_IO,
                                  "TLS handshake: the client closed the connection (it may "
                                  "not trust the server certificate: TrustServerCertificate=yes "
                                  "or install the certificate): %s",
                                  gnutls_strerror(g));
        return tls_fail(err, g, "handshake");
    }
    return MCDC_OK;
}

/* Decrypts one record into plain; 1 on data, 0 would block, -1 gone. */
static int fill(sim_tls_conn *t) {
    if (t->pos == t->len) t->pos = t->len = 0;
    if (t->len == sizeof t->plain) return 1;
    for (;;) {
        ssize_t k = gnutls_record_recv(t->s, t->plain + t->len, sizeof t->plain - t->len);
        if (k > 0) {
            t->len += (size_t)k;
            return 1;
        }
        if (k == GNUTLS_E_AGAIN && t->nonblock) return 0;
        if (k == GNUTLS_E_INTERRUPTED || k == GNUTLS_E_AGAIN) continue;
        return -1; /* EOF, close_notify or a fatal alert */
    }
}

int sim_tls_read(sim_tls_conn *t, uint8_t *p, size_t n) {
    while (n) {
        if (t->pos == t->len && fill(t) <= 0) return -1;
        size_t k = t->len - t->pos < n ? t->len - t->pos : n;
        memcpy(p, t->plain + t->pos, k);
        t->pos += k;
        p += k;
        n -= k;
    }
    return 0;
}

int sim_tls_write(sim_tls_conn *t, const uint8_t *p, size_t n) {
    while (n) {
        ssize_t k = gnutls_record_send(t->s, p, n);
        if (k == GNUTLS_E_INTERRUPTED || k == GNUTLS_E_AGAIN) continue;
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

int sim_tls_peek(sim_tls_conn *t, uint8_t *peek, size_t cap) {
    if (t->len == t->pos && gnutls_record_check_pending(t->s) == 0) {
        struct pollfd pf = {t->fd, POLLIN, 0};
        if (poll(&pf, 1, 0) <= 0) return 0;
        if (pf.revents & (POLLERR | POLLNVAL)) return -1;
    }
    if (t->pos > 0 && t->pos < t->len) { /* room for a whole record at the end */
        memmove(t->plain, t->plain + t->pos, t->len - t->pos);
        t->len -= t->pos;
        t->pos = 0;
    }
    t->nonblock = true;
    int r = t->len - t->pos < cap ? fill(t) : 1;
    t->nonblock = false;
    if (r < 0) return -1;
    size_t have = t->len - t->pos;
    memcpy(peek, t->plain + t->pos, have < cap ? have : cap);
    return have > (size_t)INT32_MAX ? INT32_MAX : (int)have;
}

void sim_tls_describe(const sim_tls_conn *t, char *out, size_t cap) {
    const char *v = gnutls_protocol_get_name(gnutls_protocol_get_version(t->s));
    const char *c = gnutls_cipher_get_name(gnutls_cipher_get(t->s));
    snprintf(out, cap, "%s %s", v ? v : "?", c ? c : "?");
}
