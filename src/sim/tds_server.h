/*
 * tds_server.h - the simulator's TCP listener and per-connection TDS loop:
 * one thread per connection (up to MCDC_SIM_SESSIONS_MAX), PRELOGIN, LOGIN7,
 * SQL batches, RPCs, ATTENTION and the faults the engine injects. The engine
 * (sim_engine.h) does the rest.
 */
#ifndef TDS_SERVER_H
#define TDS_SERVER_H

#include "sim_engine.h"

typedef struct tds_server_config {
    const char *host;     /* listen address; NULL = "127.0.0.1" */
    int port;             /* 0 = any free port (see tds_server_port) */
    int version_major;    /* product version in PRELOGIN/LOGINACK; 0 = 16 */
} tds_server_config;

typedef struct tds_server tds_server;

/* Binds and listens. The engine is borrowed and must outlive the server.
 * Caller owns *out; tds_server_free releases it. */
int tds_server_create(tds_server **out, sim_server *engine, const tds_server_config *cfg,
                      mcdc_error *err);
/* The port actually bound. */
int tds_server_port(const tds_server *s);
/* Accepts connections until tds_server_stop; then closes every session and
 * waits for their threads. */
int tds_server_run(tds_server *s, mcdc_error *err);
/* Asks run to return. Async-signal-safe. */
void tds_server_stop(tds_server *s);
/* NULL-safe. Call after run returned (or instead of run). */
void tds_server_free(tds_server *s);

#endif /* TDS_SERVER_H */
