/*
 * mcdc_repair.h - `mssql-cdc repair` (docs/repair.md): the current source
 * row of each given key appended to bronze as a recorded repair, so that
 * the next apply fixes silver through its normal path.
 *
 * The keys are JSON objects as the reconcile report's `key` column holds
 * them ({"id": 42}, {"region": "EU", "id": 7}; a NULL key value is null),
 * typed by bronze's columns:
 *   tinyint..bigint   a JSON integer (in the column's range)
 *   decimal(p,s)      a JSON integer, a number (up to 15 significant digits)
 *                     or a string of its digits ("12.50"), at most s
 *                     fraction digits and p - s integer ones
 *   text              a JSON string
 *   date              "YYYY-MM-DD"
 *   datetime...       ISO 8601 text ("2026-12-01T15:00:00.123456")
 *   binary            "0x" and hex digits
 * A member that is no key column, a key column missing, a value of the
 * wrong type: MCDC_E_INVALID naming the key (its place in the list), the
 * column and what was wrong. Every key is checked before anything is read.
 *
 * One repair, a job of one unit on the lake (mcdc_once.h): L = max_lsn,
 * taken before the read, and its commit time (its plan); the keys' rows
 * read from the source (point reads, READ COMMITTED, never NOLOCK); one
 * bronze commit with txn(mssql-cdc.repair.<run id>, 0): an
 * operation 4 row (the image) for each key the source has, an operation 1
 * row (the key, other columns NULL) for each it lacks, all stamped
 * _start_lsn L, _commit_ts L's commit time, _seqval, _command_id and
 * _batch_id NULL; then a facts row of event 'repair'. A run killed between
 * the two finds the bronze txn and writes only the facts row; a run whose
 * facts row is there does nothing. The frame's checks stand before any
 * write: bronze's commit of the run lost while its facts row stands
 * (MCDC_E_TARGET_BEHIND), a commit of its app id that is no repair's of
 * this run (MCDC_E_FOREIGN_WRITER), bronze and facts not what their roles
 * say (MCDC_E_MISMATCH).
 */
#ifndef MCDC_REPAIR_H
#define MCDC_REPAIR_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "mcdc_batch.h"
#include "mcdc_changes.h"
#include "mcdc_context.h"
#include "mcdc_options.h"
#include "mcdc_silver.h"
#include "mcdc_util.h"

/* A repair's bronze commit and facts row carry the txn app ids REPAIR and
 * REPAIR_FACTS of mcdc_txn.h, of its run id. A run id: 1 to this many characters of [A-Za-z0-9._:-] (a UUID fits). */
#define MCDC_REPAIR_RUN_ID_MAX 128
/* Keys one repair takes, and the bytes of one key's JSON. */
#define MCDC_REPAIR_KEYS_MAX 10000000
#define MCDC_REPAIR_KEY_JSON_MAX (64 * 1024)

/* Parses key object text[0..len) (the i-th of the list, for messages)
 * against the key columns names[0..n) of bronze schema bs: appends its
 * values, typed as bronze types them, as one row of keys (whose columns are
 * the n key columns in order; the caller seals it), and sets *bound to the same values as a
 * point read's bound (mcdc_changes_point_read: a scalar for one column, an
 * array for several; integers as JSON integers, other values as their
 * canonical text, owned). MCDC_E_INVALID, nothing appended, on bad input. */
int mcdc_repair_key_parse(const char *text, size_t len, size_t i, const mcdc_schema *bs,
                          const char *const *names, int32_t n, mcdc_batch *keys, json_t **bound,
                          mcdc_error *err);

/* A run id as MCDC_REPAIR_RUN_ID_MAX says; MCDC_E_INVALID otherwise. */
int mcdc_repair_run_id_check(const char *run_id, mcdc_error *err);

/* The repair of keys_json[0..n) (key objects as above) in bronze (the
 * stream's target, named as the stream was given it; under warehouse when
 * a schema.table name), recorded in facts_table under run_id (NULL: a new
 * UUID). The source options say where the source is (connectionString,
 * captureInstance). ctx: its crash hook ("after_bronze": between the bronze
 * commit and the facts row) and storage env; may be NULL. *res says what
 * was written, or that a run of the same id had written it
 * (res->already). */
int mcdc_repair_keys(const mcdc_ctx *ctx, const mcdc_opts *opts, const char *bronze,
                     const char *facts_table, const char *warehouse, const char *run_id,
                     const char *const *keys_json, size_t n, mcdc_repair_result *res,
                     mcdc_error *err);

/* Where the repair run_id stands in bronze and facts (open), read only:
 * *written (bronze holds its commit), *recorded (facts hold its row). */
int mcdc_repair_state(mcdc_table *bronze, mcdc_table *facts, const char *run_id, bool *written,
                      bool *recorded, mcdc_error *err);

/* The differing keys of run_id in report table (rows whose failure_type is
 * MISSING_TARGET, MISSING_SOURCE, RECORD_DIFF or DUPLICATE_TARGET with a
 * key; IN_FLIGHT ones are not): *keys (owned, each and the array:
 * mcdc_repair_keys_free). A run_id no row holds is MCDC_E_INVALID, naming
 * the newest runs the report holds. */
int mcdc_repair_report_keys(const mcdc_ctx *ctx, const char *report_table, const char *warehouse,
                            const char *run_id, char ***keys, size_t *n, mcdc_error *err);
void mcdc_repair_keys_free(char **keys, size_t n);

#endif /* MCDC_REPAIR_H */
