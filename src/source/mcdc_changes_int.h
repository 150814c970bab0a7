/*
 * mcdc_changes_int.h - the change feed handle's inside, shared by the files
 * that implement it (mcdc_changes.c: positions, planning, change reads;
 * mcdc_snapshot.c: the tracked table's rows). Nothing outside src/source
 * includes it.
 */
#ifndef MCDC_CHANGES_INT_H
#define MCDC_CHANGES_INT_H

#include <pthread.h>

#include "mcdc_cdc_client.h"
#include "mcdc_changes.h"
#include "mcdc_connstr.h"
#include "mcdc_reader.h"

/* One capture instance of the tracked table, as the stream follows it. */
typedef struct mcdc_follow_inst {
    char *name;                  /* owned */
    mcdc_lsn start_lsn;          /* zero: capture has not processed its enable yet */
    int64_t create_date_us;      /* with the name, tells a re-created instance apart */
    mcdc_captured_column *cols;  /* captured, computed ones left out; types as last read */
    int n_cols;
    bool *present;               /* per field of captured: this instance captures it */
    bool checked;                /* its columns were checked against the schema (or it is
                                    the oldest, which the schema was inferred with) */
} mcdc_follow_inst;

struct mcdc_changes {
    char ci[MCDC_IDENT_BYTES_MAX + 1];
    mcdc_connstr *connstr;
    mcdc_connstr_connector connector;
    mcdc_conn *control;
    mcdc_cdc_client *client;
    pthread_mutex_t mu;
    mcdc_clock clock;
    mcdc_lsn instance_start;  /* start_lsn of the instance */
    mcdc_schema *captured;    /* columns read, with their types */
    uint8_t *reads;           /* per captured column its mcdc_sql_read (owned; NULL: all
                                 read as they are) */
    mcdc_schema *schema;      /* output schema */
    mcdc_reader_options ropt; /* template for each range */
    int retries_max;          /* control-call retries */
    int backoff_ms_first;
    /* The tracked table and the key its snapshots are cut on (the capture
     * instance's unique index, or snapshotKeys). */
    char *source_schema, *source_table;
    char **keys;
    int n_keys;
    const mcdc_opts *opts;    /* borrowed: isolationLevel, lockTimeoutMs... */
    char *computed;           /* the computed columns the instance captures, "a, b"; NULL: none */
    /* Following the table's capture instances (the stream, mcdc_changes_follow.c;
     * reference §2.5). Off for the other users of the handle, which read
     * the one instance ci. */
    bool follow;
    bool explicit_columns;    /* the columns option: the user's list and types */
    mcdc_follow_inst *inst;   /* the table's instances as last listed, oldest first */
    int n_inst;
    char **seen;              /* every instance name seen (configured, listed), owned */
    int n_seen;
    mcdc_schema *expected;    /* the types the DDL check compares with (query columns) */
    bool *ci_present;         /* follow: ropt.present of ci (its columns of captured) */
    char gone_text[512];      /* mcdc_changes_gone's last answer */
};


/* The control connection: (re)opened on demand; after a call returned rc,
 * true when it should run again (a transient error, retries left; the
 * connection was dropped and the backoff waited). */
int mcdc_changes__control_connect(mcdc_changes *c, mcdc_error *err);
bool mcdc_changes__control_again(mcdc_changes *c, int rc, int *attempt, mcdc_error *err);
/* Finds the capture instance named want (exactly, else the one match
 * ignoring case) and records it: name, start LSN, table, keys. On the
 * control connection (call it under CONTROL_CALL). */
int mcdc_changes__resolve_instance(mcdc_changes *c, const char *want, mcdc_error *err);

/* ---- following (mcdc_changes_follow.c) ---------------------------------------- */
/* mcdc_changes__resolve_instance of want; when it is gone, the table the
 * names settings give (may be NULL), else want's default name
 * <schema>_<table>, still names, and its instance that covers max_lsn
 * (mcdc_changes_settings.also_names); the names that are gone are kept
 * (c->seen). MCDC_E_SCHEMA: settings named instances and none is left. */
int mcdc_changes__resolve_followed(mcdc_changes *c, const char *want,
                                   const mcdc_changes_settings *settings, mcdc_error *err);
/* At open, follow mode: resolves `want` (else the names settings give, else
 * a default name <schema>_<table> whose table still has instances), lists
 * the table's instances and infers the union of their columns (*all and
 * *all_reads, as mcdc_reader_infer_columns infers one instance's: a column
 * reads as the first instance that captures it reads it; *unreadable and
 * *computed likewise, owned). On the control connection. */
int mcdc_changes__follow_open(mcdc_changes *c, const char *want,
                              const mcdc_changes_settings *settings, bool keep_computed,
                              mcdc_schema **all, uint8_t **all_reads, char **unreadable,
                              char **computed, mcdc_error *err);
/* Once captured (the schema read) is final: which instance captures which
 * column, and the types the DDL check expects. */
int mcdc_changes__follow_ready(mcdc_changes *c, mcdc_error *err);
void mcdc_changes__follow_free(mcdc_changes *c);
/* The captured column `name` of any instance of the table (newest first),
 * NULL when none: a snapshot matches a column by its column_id. */
const mcdc_captured_column *mcdc_changes__follow_captured(const mcdc_changes *c,
                                                          const char *name);
/* The index of the listed instance a position records (read_ci), the first
 * one a stream after it reads; 0 when it records none or one no longer
 * listed (the configured one dropped: followed through the newest). */
int mcdc_changes__follow_floor(const mcdc_changes *c, const char *read_ci);
/* The reader's options for range r (its instance's name and columns). */
mcdc_reader_options mcdc_changes__range_options(const mcdc_changes *c, const mcdc_lsn_range *r);

/* Runs `call` (an expression using c->client / c->control) under the
 * control mutex, reconnecting and retrying transient failures. */
#define CONTROL_CALL(rc, c, err, call)                                   \
    do {                                                                 \
        int attempt_ = 0;                                                \
        pthread_mutex_lock(&(c)->mu);                                    \
        for (;;) {                                                       \
            (rc) = (c)->client ? MCDC_OK : mcdc_changes__control_connect((c), (err));  \
            if ((rc) == MCDC_OK) (rc) = (call);                          \
            if (!mcdc_changes__control_again((c), (rc), &attempt_, (err))) break;      \
        }                                                                \
        pthread_mutex_unlock(&(c)->mu);                                  \
    } while (0)

/* ---- snapshots (mcdc_snapshot.c, mcdc_snapshot_plan.c) ---------------------- */
/* Key columns named by a JSON array, resolved on a client: each a column the
 * stream reads (MCDC_E_INVALID when not), with its name in the table now and
 * its declared type. */
typedef struct mcdc_snap_keys {
    mcdc_key_col *cols; /* n, owned */
    int n;
    bool unique;        /* they are the columns of the capture instance's unique index, and
                           their values read back exactly (no datetime2(7) last): the key
                           n rows after a bound is always above it */
    bool bindable;      /* every one's type can be bound (else cols is NULL, n the count) */
    char why[256];      /* !bindable: which column and why */
} mcdc_snap_keys;
/* names NULL or []: no key. strict: a type no bound can be bound as is
 * MCDC_E_INVALID, else !bindable. source_names (may be NULL): each captured
 * column's name in the table now, by column_id (NULL: dropped), owned
 * (mcdc_changes__names_free). */
int mcdc_changes__snap_keys(mcdc_snap_keys *out, char ***source_names, mcdc_changes *c,
                            mcdc_cdc_client *cl, const json_t *names, bool strict,
                            mcdc_error *err);
void mcdc_changes__snap_keys_free(mcdc_snap_keys *k);
void mcdc_changes__names_free(mcdc_changes *c, char **names);
/* The key n rows after lo within [lo, hi) on the control client (*out
 * NULL: none; owned). On columns that are not a unique index the (n + 1)-th
 * row can hold lo's value as SQL Server compares it, which would end a
 * range where it starts: then twice as many rows, until [lo, bound) holds
 * one. Bounds are values, so a value is never split; a range starting on a
 * value that more than n rows hold has fewer than twice its rows. A NULL
 * bound of one key column (NULL sorts first; JSON null is an open end) is
 * sought past the same way. */
int mcdc_changes__seek(mcdc_changes *c, const mcdc_snap_keys *k, const json_t *lo,
                       const json_t *hi, int64_t n, const mcdc_source_read *rd, json_t **out,
                       mcdc_error *err);
/* How a read of the source table runs under iso (MCDC_ISO_OPTION: the
 * isolationLevel option) and lockTimeoutMs. */
mcdc_source_read mcdc_changes__source_read(const mcdc_changes *c, mcdc_isolation iso);
/* The snapshot reader's query of the captured columns (source_names their
 * names on the server), read under iso: its keys and bounds are the
 * caller's to set; the snapshot's stamp (its LSN and commit time) is the
 * caller's to fill (mcdc_reader_fill_snapshot_stamp). */
mcdc_snapshot_query mcdc_changes__snapshot_query(const mcdc_changes *c, char *const *source_names,
                                                 mcdc_isolation iso);
/* The next batch of a snapshot query's result res: at most rows_max rows,
 * each stamped with the snapshot's LSN text and commit time, its captured
 * columns' reads finished and its capture instance filled, sealed. *out is
 * NULL (and *rows 0) once res has no more rows. */
int mcdc_changes__snapshot_batch(mcdc_batch **out, int64_t *rows, const mcdc_changes *c,
                                 mcdc_result *res, int64_t rows_max, const char *lsn_text,
                                 bool has_ts, int64_t commit_us, mcdc_error *err);
/* Back to READ COMMITTED on the control connection after reads under
 * SNAPSHOT (the session keeps its level; CDC's own queries do not need it). */
void mcdc_changes__control_read_committed(mcdc_changes *c, const mcdc_source_read *rd);

#endif /* MCDC_CHANGES_INT_H */
