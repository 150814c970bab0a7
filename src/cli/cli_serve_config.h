/*
 * cli_serve_config.h - serve's configuration file (INI, read by inih): the
 * service's settings, the storage options, the databases with their
 * connection options and the tables, each resolved to what its stream job
 * needs. Everything that can be proved from the file alone is proved here,
 * each error naming the file and line; the source is asked nothing.
 */
#ifndef CLI_SERVE_CONFIG_H
#define CLI_SERVE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli_many.h"

/* One "key = value" of the file, with its line (owned strings). */
typedef struct serve_kv {
    char *key, *value;
    int line;
} serve_kv;

typedef struct serve_kvs {
    serve_kv *kv;
    size_t n, cap;
} serve_kvs;

/* The schedules a table may have: [0] apply, [1] reconcile (each FLAGS with
 * NAME_every = SECONDS), [2] backfill (EVERY FLAGS). */
#define SERVE_SCHEDULES 3
#define SERVE_SCHEDULE_BACKFILL 2
extern const char *const SERVE_SCHEDULE_NAMES[SERVE_SCHEDULES];

typedef struct serve_db {
    char *name;        /* [database NAME] */
    int line;
    serve_kvs kv;      /* its source options (connectionString resolved from its
                          _env or _file form: a secret, never printed) */
} serve_db;

typedef struct serve_table {
    char *name;        /* DB.CI, as written in [table DB.CI] */
    char *db, *ci;     /* its two parts */
    int line;
    serve_kvs kv;      /* its own keys */
    char **argv;       /* the stream flags it takes (service's, then its own) as
                          command-line words; owned, argc of them */
    int argc;
    char *facts_table, *control_table, *warehouse; /* the service's, its own copies */
    char *schedule[SERVE_SCHEDULES]; /* apply's and reconcile's flags, placeholders
                          filled (NULL: none); owned. Backfill's: NULL, see below */
    double every_s[SERVE_SCHEDULES]; /* and how often they run */
    char **backfill;   /* backfill's words ("backfill", the table's places, then the
                          flags backfill = EVERY FLAGS gives; NULL: none); owned */
    char *backfill_options; /* the options file backfill reads (the table's source
                          and storage options: holds secrets, never printed); owned */
    struct serve_schedule *running[SERVE_SCHEDULES]; /* while the table runs
                                                         (cmd_serve.c) */
    /* its backfill schedule's (cmd_serve.c): S of the snapshot its last
     * status said done ("": not done; its thread's own), and a reload's ask
     * for one more run */
    char backfill_done_at[24];
    atomic_bool backfill_rearm;
    char *fingerprint; /* every setting it runs with, in one string: a reload
                          restarts it when this changes (holds secrets: never
                          printed) */
    cli_table job;     /* its stream job (opts, places, stream) */
} serve_table;

/* Tables a reload may add to a service started without max_connections. */
#define SERVE_RELOAD_ROOM 16
/* Connections beyond one per table, by default: readers the tables share. */
#define SERVE_READ_CONNECTIONS 4

/* A schedule's interval is at least this (a shorter one is a busy loop). */
#define SERVE_SCHEDULE_SECONDS_MIN 1.0

typedef struct serve_config {
    char *path;
    /* [service] */
    int64_t max_connections, encoder_threads; /* 0: not given */
    char *metrics_listen;                     /* NULL: none */
    double metrics_poll_seconds, lag_problem_seconds;
    bool log_json, quiet;
    char *target, *app_id, *checkpoint;       /* the templates (NULL: not given) */
    char *facts_table, *control_table, *warehouse; /* shared by every table */
    serve_kvs service;                        /* its stream flags */
    /* [storage] */
    serve_kvs storage;
    serve_db *db;
    size_t n_db;
    serve_table **t;   /* owned */
    size_t n_t;
} serve_config;

/* Reads and proves path: EXIT_OK with *out (free with serve_config_free),
 * or EXIT_USAGE with every message printed ("FILE:LINE: what; what to
 * do"). Each table's job is prepared (opts, places, stream created, not
 * run) with *budget: when NULL, it is created from [service]
 * (max_connections, else one per table, 4 to read with and room for
 * SERVE_RELOAD_ROOM tables more; *budget_connections set), else the tables
 * must fit *budget_connections. Every table's stream is on runtime (the
 * service's one, which outlives every reload). The instances are not checked
 * (serve_config_check_instances asks the source). */
int serve_config_load(serve_config **out, const char *path, mcdc_budget **budget,
                      int64_t *budget_connections, mcdc_runtime *runtime);
/* A fresh copy of the source options of database k's first table (the
 * capture probe's, which outlive every reload); NULL when out of memory. */
mcdc_opts *serve_config_probe_opts(const serve_config *c, size_t k);
/* Database k's first table's capture instance (NULL: it has none). */
const char *serve_config_first_ci(const serve_config *c, size_t k);
/* Whether database ka of a and kb of b are probed with the same options:
 * the same source keys and values (in any order) and the same first table. */
bool serve_config_probe_same(const serve_config *a, size_t ka, const serve_config *b, size_t kb);
/* Asks each database once whether its tables' instances exist: EXIT_OK or
 * the exit code of the refusal (printed). Only tables whose fresh is true
 * are asked about (NULL: all). */
int serve_config_check_instances(const serve_config *c, const bool *fresh);
/* Frees c and every table still in it (NULL: nothing). Tables' threads
 * must have been joined. */
void serve_config_free(serve_config *c);
/* A table taken out of c (its slot NULL), to live on in another config. */
serve_table *serve_config_take(serve_config *c, size_t i);
void serve_table_free(serve_table *t);
/* The table named name (any case) in c: its index, or -1. */
long serve_config_find(const serve_config *c, const char *name);
/* Whether b's [service] settings that a reload cannot change differ from
 * a's: NULL when they are the same, else the name of the first that
 * differs. */
const char *serve_config_fixed_differs(const serve_config *a, const serve_config *b);

#endif
