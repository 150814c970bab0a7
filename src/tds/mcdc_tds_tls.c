/*
 * mcdc_tds_tls.c - TLS for our TDS client (GnuTLS). See mcdc_tds_tls.h.
 *
 * The GnuTLS transport is ours. During a TDS 7.x handshake what GnuTLS
 * writes is collected and sent as one PRELOGIN message when it next wants
 * to read (its flight is complete then), and what it reads is the payload
 * of the server's PRELOGIN packets. Afterwards records go straight to the
 * non-blocking socket; GNUTLS_E_AGAIN becomes EAGAIN for the stream, which
 * waits with its own deadline and timeout.
 */
#include "mcdc_tds_tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

/* A handshake flight larger than this is not a TLS handshake. */
#define TLS_FLIGHT_BYTES_MAX (256u * 1024u)

struct mcdc_tds_tls {
    gnutls_session_t sess;
    gnutls_certificate_credentials_t cred;
    mcdc_tds_stream *s;
    bool wrapped;        /* handshake inside PRELOGIN packets */
    bool login_only;     /* TLS ends once LOGIN7 is sent */
    mcdc_buf hs_out;     /* our flight, not yet sent */
    uint8_t hdr[TDS_HEADER_BYTES];
    size_t hdr_have;     /* bytes of the server's current packet header read */
    size_t hs_left;      /* payload bytes of the server's current packet not yet read */
    mcdc_error hs_err;   /* why the transport failed during the handshake */
};

/* ---- decisions ---------------------------------------------------------------- */
int mcdc_tds_tls_client_byte(const mcdc_tds_tls_params *tp) {
    return tp->require || tp->strict ? TDS_ENCRYPT_ON : TDS_ENCRYPT_OFF;
}

mcdc_tds_tls_plan mcdc_tds_tls_decide(const mcdc_tds_tls_params *tp, int server_encryption) {
    bool need = tp->require || tp->strict;
    switch (server_encryption) {
    case TDS_ENCRYPT_ON:
    case TDS_ENCRYPT_REQ: return MCDC_TDS_TLS_FULL;
    case TDS_ENCRYPT_OFF: return need ? MCDC_TDS_TLS_REFUSED : MCDC_TDS_TLS_LOGIN_ONLY;
    default: return need ? MCDC_TDS_TLS_REFUSED : MCDC_TDS_TLS_NONE;
    }
}

/* ---- transport ------------------------------------------------------------------ */
static ssize_t fail_errno(mcdc_tds_tls *t, int e) {
    gnutls_transport_set_errno(t->sess, e);
    return -1;
}

static ssize_t tls_push(gnutls_transport_ptr_t ptr, const void *p, size_t n) {
    mcdc_tds_tls *t = ptr;
    if (t->wrapped) {
        mcdc_error e = MCDC_ERROR_INIT;
        if (t->hs_out.len + n > TLS_FLIGHT_BYTES_MAX || mcdc_buf_append(&t->hs_out, p, n, &e))
            return fail_errno(t, ENOMEM);
        return (ssize_t)n;
    }
    for (;;) {
        ssize_t k = send(t->s->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k >= 0) return k;
        if (errno != EINTR) return fail_errno(t, errno);
    }
}

/* Reads without blocking; EAGAIN when nothing is there. */
static ssize_t sock_recv(mcdc_tds_tls *t, void *p, size_t n) {
    for (;;) {
        ssize_t k = recv(t->s->fd, p, n, MSG_DONTWAIT);
        if (k >= 0) return k;
        if (errno != EINTR) return fail_errno(t, errno);
    }
}

static int flush_flight(mcdc_tds_tls *t) {
    if (t->hs_out.len == 0) return MCDC_OK;
    int rc = mcdc_tds_send(t->s, TDS_PKT_PRELOGIN, t->hs_out.data, t->hs_out.len, &t->hs_err);
    mcdc_buf_reset(&t->hs_out);
    return rc;
}

static ssize_t tls_pull(gnutls_transport_ptr_t ptr, void *p, size_t n) {
    mcdc_tds_tls *t = ptr;
    if (!t->wrapped) return sock_recv(t, p, n);
    if (flush_flight(t) != MCDC_OK) return fail_errno(t, EPIPE);
    while (t->hs_left == 0) {
        ssize_t k = sock_recv(t, t->hdr + t->hdr_have, TDS_HEADER_BYTES - t->hdr_have);
        if (k <= 0) return k;
        t->hdr_have += (size_t)k;
        if (t->hdr_have < TDS_HEADER_BYTES) continue;
        t->hdr_have = 0;
        size_t len = (size_t)((t->hdr[2] << 8) | t->hdr[3]);
        /* SQL Server answers in 0x12 packets; some servers used 0x04 */
        if ((t->hdr[0] != TDS_PKT_PRELOGIN && t->hdr[0] != TDS_PKT_REPLY) ||
            len < TDS_HEADER_BYTES) {
            mcdc_error_set(&t->hs_err, MCDC_E_PROTOCOL,
                           "TLS handshake: the server sent a packet of type 0x%02X (length "
                           "%zu) instead of TLS in a PRELOGIN packet",
                           t->hdr[0], len);
            return fail_errno(t, EPROTO);
        }
        t->hs_left = len - TDS_HEADER_BYTES;
    }
    ssize_t k = sock_recv(t, p, n < t->hs_left ? n : t->hs_left);
    if (k > 0) t->hs_left -= (size_t)k;
    return k;
}

/* ---- sessions --------------------------------------------------------------------- */
static pthread_once_t g_init_once = PTHREAD_ONCE_INIT;
static int g_init_rc;
/* Once per process; GnuTLS's own destructor releases it at exit. */
static void global_init(void) { g_init_rc = gnutls_global_init(); }

void mcdc_tds_tls_free(mcdc_tds_tls *t) {
    if (t == NULL) return;
    if (t->sess) gnutls_deinit(t->sess);
    if (t->cred) gnutls_certificate_free_credentials(t->cred);
    mcdc_buf_free(&t->hs_out);
    mcdc_free(t);
}

static bool is_ip_address(const char *h) {
    uint8_t a[16];
    return inet_pton(AF_INET, h, a) == 1 || inet_pton(AF_INET6, h, a) == 1;
}

static int tls_create(mcdc_tds_tls **out, mcdc_tds_stream *s, const mcdc_tds_tls_params *tp,
                      bool validate, mcdc_error *err) {
    *out = NULL;
    pthread_once(&g_init_once, global_init);
    if (g_init_rc < 0)
        return mcdc_error_set(err, MCDC_E_IO, "TLS: initialising GnuTLS failed: %s",
                              gnutls_strerror(g_init_rc));
    mcdc_tds_tls *t = mcdc_calloc(1, sizeof *t);
    if (t == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory for a TLS session");
    t->s = s;
    const char *what = "allocating credentials";
    int g = gnutls_certificate_allocate_credentials(&t->cred);
    if (g >= 0 && validate && tp->trust_file) {
        g = gnutls_certificate_set_x509_trust_file(t->cred, tp->trust_file, GNUTLS_X509_FMT_PEM);
        if (g <= 0) {
            mcdc_tds_tls_free(t);
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "TLS: ServerCertificate %s holds no PEM certificate%s%s",
                                  tp->trust_file, g < 0 ? ": " : "",
                                  g < 0 ? gnutls_strerror(g) : "");
        }
    } else if (g >= 0 && validate) {
        what = "loading the system trust store";
        g = gnutls_certificate_set_x509_system_trust(t->cred);
        if (g == 0) g = GNUTLS_E_NO_CERTIFICATE_FOUND;
    }
    /* no session tickets: nothing may arrive after the handshake that the
     * server would send wrapped while we already read raw TLS */
    if (g >= 0) {
        what = "starting a session";
        g = gnutls_init(&t->sess, GNUTLS_CLIENT | GNUTLS_NONBLOCK | GNUTLS_NO_TICKETS);
    }
    if (g >= 0) g = gnutls_set_default_priority(t->sess);
    if (g >= 0) g = gnutls_credentials_set(t->sess, GNUTLS_CRD_CERTIFICATE, t->cred);
    const char *host = tp->host_name ? tp->host_name : "";
    const char *sni = tp->server_name ? tp->server_name : host;
    if (g >= 0 && sni[0] && !is_ip_address(sni)) {
        what = "setting the server name";
        g = gnutls_server_name_set(t->sess, GNUTLS_NAME_DNS, sni, strlen(sni));
    }
    if (g < 0) {
        mcdc_tds_tls_free(t);
        return mcdc_error_set(err, MCDC_E_IO, "TLS: %s failed: %s", what, gnutls_strerror(g));
    }
    if (validate) gnutls_session_set_verify_cert(t->sess, host[0] ? host : NULL, 0);
    gnutls_transport_set_ptr(t->sess, t);
    gnutls_transport_set_push_function(t->sess, tls_push);
    gnutls_transport_set_pull_function(t->sess, tls_pull);
    *out = t;
    return MCDC_OK;
}

static int verify_error(mcdc_tds_tls *t, const mcdc_tds_tls_params *tp, const char *server,
                        mcdc_error *err) {
    unsigned status = gnutls_session_get_verify_cert_status(t->sess);
    gnutls_datum_t txt = {NULL, 0};
    gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &txt, 0);
    bool name = (status & GNUTLS_CERT_UNEXPECTED_OWNER) != 0;
    int rc = mcdc_error_set(
        err, MCDC_E_INVALID,
        "TLS: the certificate of %s is not trusted (%s). Set TrustServerCertificate=yes to "
        "skip the check (only on a network you trust), or install the certificate's CA in "
        "the system trust store (or name it: ServerCertificate=<PEM file>)%s",
        server, txt.data ? (const char *)txt.data : "verification failed",
        name ? (tp->host_name ? "; the certificate is for another name: HostNameInCertificate="
                                "<name> sets the name to expect"
                              : "")
             : "");
    gnutls_free(txt.data);
    return rc;
}

static int handshake(mcdc_tds_tls *t, const mcdc_tds_tls_params *tp, const char *server,
                     mcdc_error *err) {
    for (;;) {
        int g = gnutls_handshake(t->sess);
        if (g == GNUTLS_E_SUCCESS) break;
        if (g == GNUTLS_E_AGAIN || g == GNUTLS_E_INTERRUPTED) {
            int rc = mcdc_tds_wait(t->s, gnutls_record_get_direction(t->sess) ? POLLOUT : POLLIN,
                                   err);
            if (rc != MCDC_OK) return rc;
            continue;
        }
        if (g == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) return verify_error(t, tp, server, err);
        if (t->hs_err.code != MCDC_OK) {
            *err = t->hs_err;
            return err->code;
        }
        if (gnutls_error_is_fatal(g) || g < 0)
            return mcdc_error_set(err, MCDC_E_TRANSIENT,
                                  "TLS handshake with %s failed: %s%s", server,
                                  gnutls_strerror(g),
                                  g == GNUTLS_E_PREMATURE_TERMINATION ||
                                          g == GNUTLS_E_PULL_ERROR
                                      ? " (the server closed the connection)"
                                      : "");
    }
    if (t->wrapped && flush_flight(t) != MCDC_OK) {
        *err = t->hs_err;
        return err->code;
    }
    t->wrapped = false;
    return MCDC_OK;
}

/* ---- the exchange ---------------------------------------------------------------------- */
/* Reads a whole reply message's payload into out. */
static int read_message(mcdc_tds_stream *s, mcdc_buf *out, mcdc_error *err) {
    for (;;) {
        bool end;
        int rc = mcdc_tds_at_end(s, &end, err);
        if (rc != MCDC_OK || end) return rc;
        rc = mcdc_buf_append(out, s->buf + s->pos, s->len - s->pos, err);
        if (rc != MCDC_OK) return rc;
        s->pos = s->len;
    }
}

static int prelogin(mcdc_tds_stream *s, int client_byte, int *server_byte, mcdc_error *err) {
    mcdc_buf msg = {0};
    int rc = mcdc_tds_build_prelogin(&msg, client_byte, err);
    if (rc == MCDC_OK) rc = mcdc_tds_send(s, TDS_PKT_PRELOGIN, msg.data, msg.len, err);
    mcdc_tds_begin_reply(s);
    msg.len = 0;
    if (rc == MCDC_OK) rc = read_message(s, &msg, err);
    if (rc == MCDC_OK) rc = mcdc_tds_parse_prelogin(msg.data, msg.len, server_byte, err);
    mcdc_buf_free(&msg);
    return rc;
}

int mcdc_tds_prelogin_exchange(mcdc_tds_stream *s, const mcdc_tds_tls_params *tp,
                               const char *server, mcdc_error *err) {
    MCDC_ASSERT(s->fd >= 0 && s->tls == NULL);
    int server_byte = -1, rc;
    if (tp->strict) {
        /* TDS 8.0: TLS first, always validated unless trusted explicitly */
        rc = tls_create(&s->tls, s, tp, !tp->trust_server_certificate, err);
        if (rc == MCDC_OK) {
            static const gnutls_datum_t alpn = {(unsigned char *)"tds/8.0", 7};
            gnutls_alpn_set_protocols(s->tls->sess, &alpn, 1, 0);
            rc = handshake(s->tls, tp, server, err);
        }
        if (rc == MCDC_OK) rc = prelogin(s, mcdc_tds_tls_client_byte(tp), &server_byte, err);
        return rc;
    }
    rc = prelogin(s, mcdc_tds_tls_client_byte(tp), &server_byte, err);
    if (rc != MCDC_OK) return rc;
    mcdc_tds_tls_plan plan = mcdc_tds_tls_decide(tp, server_byte);
    if (plan == MCDC_TDS_TLS_NONE) return MCDC_OK;
    if (plan == MCDC_TDS_TLS_REFUSED)
        return mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                              "%s does not support encryption (PRELOGIN answered %s), and "
                              "Encrypt=yes requires TLS; Encrypt=no connects without it",
                              server, server_byte == TDS_ENCRYPT_OFF ? "OFF" : "NOT_SUP");
    /* Certificates are checked when the user asked for encryption; a
     * LOGIN7-only or server-forced session is opportunistic, as in ODBC. */
    bool validate = tp->require && !tp->trust_server_certificate;
    MCDC_ASSERT(s->raw_pos == s->raw_len); /* nothing may follow the PRELOGIN reply */
    rc = tls_create(&s->tls, s, tp, validate, err);
    if (rc != MCDC_OK) return rc;
    s->tls->wrapped = true;
    s->tls->login_only = plan == MCDC_TDS_TLS_LOGIN_ONLY;
    /* the stream must not read or write through TLS before it is up */
    mcdc_tds_tls *t = s->tls;
    s->tls = NULL;
    rc = handshake(t, tp, server, err);
    s->tls = t;
    return rc;
}

/* ---- data --------------------------------------------------------------------------- */
ssize_t mcdc_tds_tls_recv(mcdc_tds_tls *t, void *p, size_t n) {
    ssize_t k = gnutls_record_recv(t->sess, p, n);
    if (k >= 0) return k;
    if (k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED) {
        errno = k == GNUTLS_E_AGAIN ? EAGAIN : EINTR;
        return -1;
    }
    if (k == GNUTLS_E_PREMATURE_TERMINATION) return 0;
    errno = EPROTO;
    return -1;
}

ssize_t mcdc_tds_tls_send(mcdc_tds_tls *t, const void *p, size_t n) {
    ssize_t k = gnutls_record_send(t->sess, p, n);
    if (k >= 0) return k;
    if (k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED) {
        errno = k == GNUTLS_E_AGAIN ? EAGAIN : EINTR;
        return -1;
    }
    errno = EPIPE;
    return -1;
}

void mcdc_tds_tls_message_sent(mcdc_tds_stream *s, uint8_t type) {
    if (s->tls && s->tls->login_only && type == TDS_PKT_LOGIN7) {
        /* no close_notify: the server continues in plaintext, as we do */
        mcdc_tds_tls_free(s->tls);
        s->tls = NULL;
    }
}
