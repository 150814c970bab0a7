/*
 * tds_tls.h - the simulator's TLS, server side (GnuTLS): the PRELOGIN
 * encryption decision, the server certificate (given or generated and kept
 * in the data directory), and one TLS session per connection.
 *
 * TDS 7.x carries the TLS handshake as the payload of PRELOGIN (0x12)
 * packets; once it completes, TLS runs directly on the TCP stream and whole
 * TDS packets are its application data. TDS 8.0 ("strict") starts with a
 * plain TLS handshake (ALPN "tds/8.0") before any TDS byte.
 * Facts: spec/formats.md PART C ("TLS inside TDS", "TDS 8.0").
 */
#ifndef TDS_TLS_H
#define TDS_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mcdc_util.h"

/* What the server offers (--tls). */
typedef enum sim_tls_mode {
    SIM_TLS_OFF = 0,   /* no certificate: PRELOGIN answers NOT_SUP (plaintext only) */
    SIM_TLS_ON,        /* SQL Server's default: TLS when the client asks, LOGIN7 always */
    SIM_TLS_REQUIRED   /* "force encryption": the whole session, always */
} sim_tls_mode;

/* The PRELOGIN ENCRYPTION byte the server answers to the client's byte
 * (-1 when the client sent none), per SQL Server's table: with TLS on,
 * OFF -> OFF (LOGIN7 only), ON/REQ -> ON, NOT_SUP -> NOT_SUP; required:
 * OFF/NOT_SUP -> REQ, ON/REQ -> ON; off: always NOT_SUP. The client's
 * certificate bit (0x20) is ignored. */
int sim_tls_negotiate(sim_tls_mode mode, int client_encryption);

/* What happens after the PRELOGIN reply for a negotiated byte pair. */
typedef enum sim_tls_after {
    SIM_TLS_AFTER_PLAIN = 0,  /* no TLS at all */
    SIM_TLS_AFTER_LOGIN_ONLY, /* TLS handshake, LOGIN7 through TLS, then plaintext */
    SIM_TLS_AFTER_FULL,       /* TLS handshake, everything through TLS */
    SIM_TLS_AFTER_REFUSE      /* the client refused what the server requires: close */
} sim_tls_after;
sim_tls_after sim_tls_after_prelogin(int client_encryption, int server_encryption);

/* Server-wide credentials. */
typedef struct sim_tls_ctx sim_tls_ctx;

/* Loads cert_file/key_file (PEM) when both are given; otherwise loads or
 * creates a self-signed certificate for CN=localhost (SAN localhost and
 * 127.0.0.1) as tls-cert.pem / tls-key.pem in dir, reused on restart.
 * Caller owns *out; sim_tls_ctx_free releases it. */
int sim_tls_ctx_create(sim_tls_ctx **out, const char *cert_file, const char *key_file,
                       const char *dir, mcdc_error *err);
void sim_tls_ctx_free(sim_tls_ctx *ctx);

/* Sends all n bytes on the socket (the server's own writer, which accounts
 * network waits). 0, or non-zero when the peer is gone. */
typedef int (*sim_tls_raw_write_fn)(void *ctx, const uint8_t *p, size_t n);

/* One connection's TLS session. */
typedef struct sim_tls_conn sim_tls_conn;

int sim_tls_conn_create(sim_tls_conn **out, sim_tls_ctx *ctx, int fd, sim_tls_raw_write_fn w,
                        void *wctx, mcdc_error *err);
void sim_tls_conn_free(sim_tls_conn *t);
/* Runs the handshake: wrapped in PRELOGIN packets (TDS 7.x) or directly on
 * the socket (TDS 8.0 strict). */
int sim_tls_handshake(sim_tls_conn *t, bool wrapped, mcdc_error *err);
/* Reads exactly n bytes of application data. 0, or non-zero at EOF/error. */
int sim_tls_read(sim_tls_conn *t, uint8_t *p, size_t n);
/* Writes n bytes as application data. 0, or non-zero when the peer is gone. */
int sim_tls_write(sim_tls_conn *t, const uint8_t *p, size_t n);
/* Without blocking: decrypts what has arrived. Returns -1 when the peer is
 * gone, 0 when no application byte is waiting, else the number of bytes
 * waiting (at least 1), the first min(that, cap) copied to peek. */
int sim_tls_peek(sim_tls_conn *t, uint8_t *peek, size_t cap);
/* The protocol and cipher in use ("TLS1.2 ECDHE-ECDSA-AES-256-GCM"), for logs. */
void sim_tls_describe(const sim_tls_conn *t, char *out, size_t cap);

#endif /* TDS_TLS_H */
