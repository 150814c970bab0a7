/*
 * tds_server.h - the simulator's TCP listener and per-connection TDS loop:
 * one thread per connection (up to MCDC_SIM_SESSIONS_MAX), PRELOGIN, TLS
 * (tds_tls.h), LOGIN7 (bounded before it: message sizes, time to log in,
 * connections not logged in yet),
 * SQL batches, RPCs, ATTENTION and the faults the engine injects. The engine
 * (sim_engine.h) does the rest.
 */
#ifndef TDS_SERVER_H
#define TDS_SERVER_H

#include "sim_engine.h"
#include "tds_tls.h"

typedef struct sim_tds_server_config {
    const char *host;     /* listen address; NULL = "127.0.0.1" */
    int port;             /* 0 = any free port (see sim_tds_server_port) */
    int version_major;    /* product version in PRELOGIN/LOGINACK; 0 = 16 */
    sim_tls_mode tls_mode; /* 0 = SIM_TLS_OFF: PRELOGIN answers NOT_SUP */
    const char *tls_cert_file, *tls_key_file; /* PEM; both NULL = self-signed in tls_dir */
    const char *tls_dir;  /* where the self-signed certificate is kept */
    /* A connection that has not completed LOGIN7 this long after it was
     * accepted is closed; 0 = SIM_TDS_LOGIN_TIMEOUT_MS_DEFAULT, < 0 = never.
     * Logged-in sessions may idle as long as they like. */
    int login_timeout_ms;
    /* Connections not yet logged in at once; more are closed when accepted.
     * 0 = SIM_TDS_PENDING_LOGINS_DEFAULT. */
    int max_pending_logins;
} sim_tds_server_config;

#define SIM_TDS_LOGIN_TIMEOUT_MS_DEFAULT 60000
#define SIM_TDS_PENDING_LOGINS_DEFAULT 64

typedef struct sim_tds_server sim_tds_server;

/* Binds and listens. The engine is borrowed and must outlive the server.
 * Caller owns *out; sim_tds_server_free releases it. */
int sim_tds_server_create(sim_tds_server **out, sim_server *engine, const sim_tds_server_config *cfg,
                      mcdc_error *err);
/* The port actually bound. */
int sim_tds_server_port(const sim_tds_server *s);
/* Accepts connections until sim_tds_server_stop; then closes every session and
 * waits for their threads. */
int sim_tds_server_run(sim_tds_server *s, mcdc_error *err);
/* Asks run to return. Async-signal-safe. */
void sim_tds_server_stop(sim_tds_server *s);
/* NULL-safe. Call after run returned (or instead of run). */
void sim_tds_server_free(sim_tds_server *s);

#endif /* TDS_SERVER_H */
