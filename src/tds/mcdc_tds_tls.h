/*
 * mcdc_tds_tls.h - TLS for our TDS client (GnuTLS): the PRELOGIN encryption
 * exchange and the session under the packet stream.
 *
 * TDS 7.x: PRELOGIN in clear, then the TLS handshake inside PRELOGIN (0x12)
 * packets, then either the LOGIN7 message alone through TLS (both sides said
 * OFF) or the whole connection. TDS 8.0 (Encrypt=strict): TLS first, ALPN
 * "tds/8.0", then PRELOGIN and everything else inside it. Once the session
 * is up the stream calls mcdc_tds_tls_recv/send instead of recv/send; with
 * no TLS the stream never touches this module.
 * Facts: spec/formats.md PART C ("TLS inside TDS", "TDS 8.0").
 */
#ifndef MCDC_TDS_TLS_H
#define MCDC_TDS_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "mcdc_tds_proto.h"

typedef struct mcdc_tds_tls mcdc_tds_tls;

/* PRELOGIN ENCRYPTION values (TDS_ENCRYPT_*): mcdc_tds_consts.h. */

/* What the connection string asks for. */
typedef struct mcdc_tds_tls_params {
    bool require;     /* Encrypt=yes/mandatory/true: the whole session in TLS */
    bool strict;      /* Encrypt=strict: TDS 8.0, TLS before any TDS byte */
    bool trust_server_certificate; /* skip certificate validation */
    const char *host_name; /* checked against the certificate (HostNameInCertificate
                            * or the server's host) */
    const char *server_name; /* sent as SNI when a DNS name; NULL = host_name */
    const char *trust_file; /* PEM certificates trusted instead of the system store
                             * (ServerCertificate); NULL = system store */
} mcdc_tds_tls_params;

/* The client's decision after the server's PRELOGIN answer. */
typedef enum mcdc_tds_tls_plan {
    MCDC_TDS_TLS_NONE = 0,    /* plaintext */
    MCDC_TDS_TLS_LOGIN_ONLY,  /* LOGIN7 through TLS, then plaintext */
    MCDC_TDS_TLS_FULL,        /* everything through TLS */
    MCDC_TDS_TLS_REFUSED      /* we require TLS, the server does not offer it */
} mcdc_tds_tls_plan;

/* The ENCRYPTION byte we send: ON when TLS is required, else OFF (TLS for
 * the LOGIN7 packet when the server has a certificate). */
int mcdc_tds_tls_client_byte(const mcdc_tds_tls_params *tp);
/* Our plan for the server's answer (-1 = no ENCRYPTION option): OFF -> LOGIN7
 * only, ON/REQ -> full, NOT_SUP -> plaintext, or refused when we require TLS
 * and the server answers NOT_SUP or OFF. */
mcdc_tds_tls_plan mcdc_tds_tls_decide(const mcdc_tds_tls_params *tp, int server_encryption);

/* PRELOGIN (and TLS as agreed) on a freshly connected stream, bounded by
 * s->deadline_us. On success the stream reads and writes through TLS when
 * TLS is on; the next message sent must be LOGIN7. Errors name `server`
 * and never contain the connection string. */
int mcdc_tds_prelogin_exchange(mcdc_tds_stream *s, const mcdc_tds_tls_params *tp,
                               const char *server, mcdc_error *err);

/* ---- for mcdc_tds_stream.c ------------------------------------------------- */
/* Like recv/send on a non-blocking socket: bytes moved (> 0), 0 at the end
 * of the stream (recv), -1 with errno EAGAIN (wait for the socket) or EPROTO
 * (TLS failed: the connection is unusable). */
ssize_t mcdc_tds_tls_recv(mcdc_tds_tls *t, void *p, size_t n);
ssize_t mcdc_tds_tls_send(mcdc_tds_tls *t, const void *p, size_t n);
/* The stream sent a whole message of this packet type: after LOGIN7 on a
 * login-only session TLS ends (the stream goes back to plaintext). */
void mcdc_tds_tls_message_sent(mcdc_tds_stream *s, uint8_t type);
/* NULL-safe. */
void mcdc_tds_tls_free(mcdc_tds_tls *t);

/* From mcdc_tds_stream.c, for the handshake: waits for the socket (POLLIN or
 * POLLOUT) within the stream's deadline and timeout. */
int mcdc_tds_wait(mcdc_tds_stream *s, short events, mcdc_error *err);

#endif /* MCDC_TDS_TLS_H */
