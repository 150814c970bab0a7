/*
 * sim_cdc.c - SQL Server CDC in the simulator: sys.sp_cdc_* procedures,
 * change rows (pending until captured), the capture process (latency,
 * maxtrans, idle mapping entries every ~305 s of server time), retention
 * cleanup, and the sim.* control procedures.
 *
 * Life of a change: a DML statement writes its row images to
 * "__sim_pending.<ci>" with a NULL start LSN and the transaction key; the
 * commit stamps them with the commit LSN and queues the transaction in
 * __sim_pending_tx; a capture scan moves queued transactions (commit order,
 * at most maxtrans, only those committed latency_ms ago) into
 * cdc.[<ci>_CT] and cdc.lsn_time_mapping in one SQLite transaction, so
 * max_lsn never passes a change that is not visible yet.
 */
#include "sim_engine_int.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *CDC_SCHEMA =
    "CREATE TABLE IF NOT EXISTS \"cdc.lsn_time_mapping\"(start_lsn BLOB PRIMARY KEY, tran_begin_time TEXT,"
    " tran_end_time TEXT, tran_id BLOB, tran_begin_lsn BLOB) WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS \"cdc.lsn_time_mapping_time\" ON \"cdc.lsn_time_mapping\"(tran_end_time);"
    "CREATE TABLE IF NOT EXISTS \"cdc.change_tables\"(object_id INT, version INT, source_object_id INT,"
    " capture_instance TEXT PRIMARY KEY COLLATE NOCASE, start_lsn BLOB, end_lsn BLOB, supports_net_changes INT,"
    " has_drop_pending INT, role_name TEXT, index_name TEXT, filegroup_name TEXT, create_date TEXT,"
    " partition_switch INT, source_schema TEXT, source_table TEXT, source_name TEXT COLLATE NOCASE,"
    " enable_lsn BLOB, index_column_list TEXT, captured_column_list TEXT);"
    "CREATE TABLE IF NOT EXISTS \"cdc.captured_columns\"(object_id INT, column_name TEXT, column_id INT,"
    " column_type TEXT, column_ordinal INT, is_computed INT, capture_instance TEXT COLLATE NOCASE,"
    " character_maximum_length INT, numeric_precision INT, numeric_precision_radix INT, numeric_scale INT,"
    " datetime_precision INT);"
    "CREATE TABLE IF NOT EXISTS \"cdc.index_columns\"(object_id INT, column_name TEXT, index_ordinal INT,"
    " column_id INT, capture_instance TEXT COLLATE NOCASE);"
    "CREATE TABLE IF NOT EXISTS \"cdc.ddl_history\"(source_object_id INT, object_id INT, required_column_update INT,"
    " ddl_command TEXT, ddl_lsn BLOB, ddl_time TEXT, capture_instance TEXT COLLATE NOCASE);"
    "CREATE TABLE IF NOT EXISTS __sim_pending_tx(commit_lsn BLOB PRIMARY KEY, begin_lsn BLOB, begin_time TEXT,"
    " end_time TEXT, tran_id BLOB, end_utc_us INT, no_map INT DEFAULT 0);"
    /* DDL of captured tables, posted to cdc.ddl_history when capture reads
     * its commit (alter_col: an ALTER COLUMN the instance's change table
     * follows then) */
    "CREATE TABLE IF NOT EXISTS __sim_pending_ddl(txkey INT, commit_lsn BLOB, ddl_lsn BLOB, ddl_time TEXT, ddl_command TEXT,"
    " source_object_id INT, object_id INT, required_column_update INT, capture_instance TEXT COLLATE NOCASE,"
    " alter_col TEXT, alter_type TEXT);"
    "CREATE INDEX IF NOT EXISTS __sim_pending_ddl_commit ON __sim_pending_ddl(commit_lsn);"
    "INSERT OR IGNORE INTO __sim_columns VALUES"
    " ('cdc.lsn_time_mapping', 1, 'start_lsn', 'binary(10)', 0, 1),"
    " ('cdc.lsn_time_mapping', 2, 'tran_begin_time', 'datetime', 1, 0),"
    " ('cdc.lsn_time_mapping', 3, 'tran_end_time', 'datetime', 1, 0),"
    " ('cdc.lsn_time_mapping', 4, 'tran_id', 'varbinary(10)', 1, 0),"
    " ('cdc.lsn_time_mapping', 5, 'tran_begin_lsn', 'binary(10)', 1, 0),"
    " ('cdc.change_tables', 1, 'object_id', 'int', 0, 0),"
    " ('cdc.change_tables', 4, 'capture_instance', 'nvarchar(128)', 0, 0),"
    " ('cdc.change_tables', 5, 'start_lsn', 'binary(10)', 1, 0),"
    " ('cdc.change_tables', 6, 'end_lsn', 'binary(10)', 1, 0),"
    " ('cdc.change_tables', 13, 'create_date', 'datetime', 1, 0),"
    " ('cdc.ddl_history', 5, 'ddl_lsn', 'binary(10)', 1, 0),"
    " ('cdc.ddl_history', 6, 'ddl_time', 'datetime', 1, 0),"
    " ('cdc.ddl_history', 4, 'ddl_command', 'nvarchar(max)', 1, 0);"
    "INSERT OR IGNORE INTO __sim_tables VALUES ('cdc.lsn_time_mapping', 'cdc', 'lsn_time_mapping', 1205579333, '', 0),"
    " ('cdc.change_tables', 'cdc', 'change_tables', 1125579048, '', 0),"
    " ('cdc.captured_columns', 'cdc', 'captured_columns', 1173579219, '', 0),"
    " ('cdc.ddl_history', 'cdc', 'ddl_history', 1237579447, '', 0),"
    " ('cdc.index_columns', 'cdc', 'index_columns', 1189579276, '', 0);";

/* Idle entries and retention (time-driven) run at most this often from the
 * background capture thread; sim.run_capture runs them every time. */
#define CDC_HOUSEKEEPING_US 1000000

/* Bumped by whatever gives a capture scan work (a committed change, a new
 * instance): the background thread skips scans while it stays the same and
 * the last scan left nothing queued. One counter for every server of the
 * process: a bump elsewhere costs a scan, nothing more. */
static _Atomic uint64_t capture_work;

int sim_cdc_init_db(sim_db *d, mcdc_error *err) {
    /* a data dir of an older build: its queue gets the column of DDL-only
     * transactions (which map no LSN to a time) */
    sqlite3_stmt *st;
    bool old_queue = false;
    if (sqlite3_prepare_v2(d->w, "SELECT (SELECT count(*) FROM pragma_table_info('__sim_pending_tx')) > 0 AND"
                                 " (SELECT count(*) FROM pragma_table_info('__sim_pending_tx') WHERE name = 'no_map') = 0",
                           -1, &st, NULL) == SQLITE_OK) {
        old_queue = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == 1;
        sqlite3_finalize(st);
    }
    int rc = old_queue ? sim_sql(d->w, err, "ALTER TABLE __sim_pending_tx ADD COLUMN no_map INT DEFAULT 0") : MCDC_OK;
    if (rc == MCDC_OK) rc = sim_sql(d->w, err, "%s", CDC_SCHEMA);
    return rc == MCDC_OK ? sim_caplog_init_db(d, err) : rc;
}

static void local_text(sim_server *srv, int64_t utc_us, char out[48]) {
    sim_type t = {SIM_T_DATETIME, 0, 3, 0};
    sim_format_datetime(sim_srv_local_us(srv, utc_us), &t, out);
}

bool sim_cdc_table_captured(sim_db *d, const char *tbl) {
    sqlite3_stmt *st;
    bool ok = false;
    if (sqlite3_prepare_v2(d->w, "SELECT 1 FROM \"cdc.change_tables\" WHERE source_name = ?", -1, &st, NULL) != SQLITE_OK)
        return false;
    sqlite3_bind_text(st, 1, tbl, -1, SQLITE_STATIC);
    ok = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return ok;
}

/* ---- change rows ----------------------------------------------------------- */
int sim_cdc_capture_row(sim_session *s, const char *tbl, char cols[][SIM_NAME_MAX], int ncols, int op,
                        const sim_rowimg *img, const bool *set_cols, uint64_t seqval, int cmd_id, mcdc_error *err) {
    sqlite3 *w = s->db->w;
    sqlite3_stmt *ci_st;
    int rc = MCDC_OK;
    if (sqlite3_prepare_v2(w, "SELECT capture_instance FROM \"cdc.change_tables\" WHERE source_name = ?", -1, &ci_st, NULL) != SQLITE_OK)
        return sim_sqlite_err(w, SQLITE_ERROR, err);
    sqlite3_bind_text(ci_st, 1, tbl, -1, SQLITE_STATIC);
    while (rc == MCDC_OK && sqlite3_step(ci_st) == SQLITE_ROW) {
        char ci[SIM_NAME_MAX];
        snprintf(ci, sizeof ci, "%s", (const char *)sqlite3_column_text(ci_st, 0));
        /* captured columns in ordinal order */
        sqlite3_stmt *cc;
        char names[MCDC_COLUMNS_MAX > 1024 ? 1024 : MCDC_COLUMNS_MAX][SIM_NAME_MAX / 4];
        int src[1024];
        int nc = 0;
        /* a captured column's value comes from the table's column of the
         * same column_id: a dropped one (and one added back under its name,
         * a new column) reads NULL, "null values will be supplied for the
         * column in the subsequent change entries"; a computed one is NULL
         * in every change row (both: About change data capture, SQL Server
         * docs) */
        if (sqlite3_prepare_v2(w, "SELECT c.column_name, c.is_computed = 0 AND s.name IS NOT NULL FROM \"cdc.captured_columns\" c"
                                  " LEFT JOIN __sim_columns s ON s.tbl = ?2 AND s.column_id = c.column_id AND s.name = c.column_name"
                                  " WHERE c.capture_instance = ?1 ORDER BY c.column_ordinal",
                               -1, &cc, NULL) != SQLITE_OK) { rc = sim_sqlite_err(w, SQLITE_ERROR, err); break; }
        sqlite3_bind_text(cc, 1, ci, -1, SQLITE_STATIC);
        sqlite3_bind_text(cc, 2, tbl, -1, SQLITE_STATIC);
        while (sqlite3_step(cc) == SQLITE_ROW && nc < 1024) {
            const char *n = (const char *)sqlite3_column_text(cc, 0);
            snprintf(names[nc], sizeof names[nc], "%s", n);
            src[nc] = -1;
            if (sqlite3_column_int(cc, 1))
                for (int k = 0; k < ncols; k++) if (mcdc_str_ieq(cols[k], n)) src[nc] = k;
            nc++;
        }
        sqlite3_finalize(cc);
        mcdc_buf q = {0};
        mcdc_buf_printf(&q, NULL, "INSERT INTO \"__sim_pending.%s\"(\"__$seqval\", \"__$operation\", \"__$update_mask\", \"__$command_id\", \"__$txkey\"", ci);
        for (int k = 0; k < nc; k++) mcdc_buf_printf(&q, NULL, ", \"%s\"", names[k]);
        mcdc_buf_append_str(&q, ") VALUES (?, ?, ?, ?, ?", NULL);
        for (int k = 0; k < nc; k++) mcdc_buf_append_str(&q, ", ?", NULL);
        mcdc_buf_append_str(&q, ")", NULL);
        mcdc_buf_cstr(&q, NULL);
        sqlite3_stmt *ins;
        if (sqlite3_prepare_v2(w, (const char *)q.data, -1, &ins, NULL) != SQLITE_OK) rc = sim_sqlite_err(w, SQLITE_ERROR, err);
        mcdc_buf_free(&q);
        if (rc != MCDC_OK) break;
        uint8_t lsn[10], mask[128];
        sim_lsn_bytes(seqval, lsn);
        int mlen = (nc + 7) / 8;
        if (mlen > 128) mlen = 128;
        memset(mask, 0, sizeof mask);
        for (int k = 0; k < nc && k < 1024; k++) {
            bool on = op == 1 || op == 2 || !set_cols || (src[k] >= 0 && set_cols[src[k]]);
            if (on && mlen - 1 - k / 8 >= 0) mask[mlen - 1 - k / 8] |= (uint8_t)(1u << (k % 8));
        }
        sqlite3_bind_blob(ins, 1, lsn, 10, SQLITE_TRANSIENT);
        sqlite3_bind_int(ins, 2, op);
        sqlite3_bind_blob(ins, 3, mask, mlen, SQLITE_TRANSIENT);
        sqlite3_bind_int(ins, 4, cmd_id);
        sqlite3_bind_int64(ins, 5, (int64_t)s->tran_id);
        for (int k = 0; k < nc; k++) {
            if (src[k] >= 0) sqlite3_bind_value(ins, 6 + k, img->v[src[k]]);
            else sqlite3_bind_null(ins, 6 + k);
        }
        if (sqlite3_step(ins) != SQLITE_DONE) rc = sim_sqlite_err(w, SQLITE_ERROR, err);
        sqlite3_finalize(ins);
        if (rc == MCDC_OK) {
            s->tran_cdc = true;
            bool have = false;
            for (int k = 0; k < s->tran_ncis; k++) if (mcdc_str_ieq(s->tran_cis[k], ci)) have = true;
            if (!have && s->tran_ncis < 8) snprintf(s->tran_cis[s->tran_ncis++], SIM_NAME_MAX, "%s", ci);
        }
    }
    sqlite3_finalize(ci_st);
    return rc;
}

int sim_cdc_commit(sim_session *s, uint64_t commit_lsn, mcdc_error *err) {
    sim_db *d = s->tran_db;
    uint8_t lsn[10], blsn[10], tid[10];
    sim_lsn_bytes(commit_lsn, lsn);
    sim_lsn_bytes(s->tran_begin_lsn, blsn);
    sim_lsn_bytes(s->tran_id, tid);
    int rc = MCDC_OK;
    for (int k = 0; k < s->tran_ncis && rc == MCDC_OK; k++) {
        char *q = sqlite3_mprintf("UPDATE \"__sim_pending.%w\" SET \"__$start_lsn\" = ? WHERE \"__$txkey\" = ? AND \"__$start_lsn\" IS NULL",
                                  s->tran_cis[k]);
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(d->w, q, -1, &st, NULL) == SQLITE_OK) {
            sqlite3_bind_blob(st, 1, lsn, 10, SQLITE_TRANSIENT);
            sqlite3_bind_int64(st, 2, (int64_t)s->tran_id);
            if (sqlite3_step(st) != SQLITE_DONE) rc = sim_sqlite_err(d->w, SQLITE_ERROR, err);
            sqlite3_finalize(st);
        } /* else: the instance was disabled meanwhile */
        sqlite3_free(q);
    }
    if (rc != MCDC_OK) return rc;
    int64_t now = sim_srv_utc_us(s->srv);
    char bt[48], et[48];
    local_text(s->srv, s->tran_begin_utc_us, bt);
    local_text(s->srv, now, et);
    sqlite3_stmt *st;
    /* the transaction's DDL gets its commit LSN: capture posts it then */
    if (sqlite3_prepare_v2(d->w, "UPDATE __sim_pending_ddl SET commit_lsn = ?1 WHERE txkey = ?2 AND commit_lsn IS NULL", -1, &st,
                           NULL) != SQLITE_OK)
        return sim_sqlite_err(d->w, SQLITE_ERROR, err);
    sqlite3_bind_blob(st, 1, lsn, 10, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, (int64_t)s->tran_id);
    if (sqlite3_step(st) != SQLITE_DONE) rc = sim_sqlite_err(d->w, SQLITE_ERROR, err);
    sqlite3_finalize(st);
    if (rc != MCDC_OK) return rc;
    /* cdc.lsn_time_mapping holds "one row for each transaction having rows
     * in a change table" (its documentation): a transaction of DDL alone is
     * queued for capture, and maps no time */
    if (sqlite3_prepare_v2(d->w, "INSERT INTO __sim_pending_tx(commit_lsn, begin_lsn, begin_time, end_time, tran_id, end_utc_us,"
                                 " no_map) VALUES (?, ?, ?, ?, ?, ?, ?)", -1, &st, NULL) != SQLITE_OK)
        return sim_sqlite_err(d->w, SQLITE_ERROR, err);
    sqlite3_bind_int(st, 7, s->tran_ncis == 0);
    sqlite3_bind_blob(st, 1, lsn, 10, SQLITE_TRANSIENT);
    sqlite3_bind_blob(st, 2, blsn, 10, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 3, bt, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 4, et, -1, SQLITE_TRANSIENT);
    sqlite3_bind_blob(st, 5, tid, 10, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 6, now);
    if (sqlite3_step(st) != SQLITE_DONE) rc = sim_sqlite_err(d->w, SQLITE_ERROR, err);
    sqlite3_finalize(st);
    atomic_fetch_add(&capture_work, 1);
    return rc;
}

void sim_cdc_rollback(sim_session *s) {
    for (int k = 0; k < s->tran_ncis; k++)
        sim_sql(s->tran_db->w, NULL, "DELETE FROM \"__sim_pending.%w\" WHERE \"__$txkey\" = %lld AND \"__$start_lsn\" IS NULL",
                s->tran_cis[k], (long long)s->tran_id);
    /* a rolled-back DDL never reaches cdc.ddl_history */
    if (s->tran_logged)
        sim_sql(s->tran_db->w, NULL, "DELETE FROM __sim_pending_ddl WHERE txkey = %lld AND commit_lsn IS NULL", (long long)s->tran_id);
}

/* ---- capture ------------------------------------------------------------------ */
static int64_t text_us(const char *t) {
    int64_t us = 0;
    if (!t || mcdc_parse_ts_us(t, strlen(t), &us, NULL) != MCDC_OK) return INT64_MIN;
    return us;
}

static int ct_columns(sqlite3 *w, const char *ci, mcdc_buf *out) {
    sqlite3_stmt *st;
    char ct[SIM_NAME_MAX];
    snprintf(ct, sizeof ct, "cdc.%s_CT", ci);
    if (sqlite3_prepare_v2(w, "SELECT name FROM __sim_columns WHERE tbl = ? ORDER BY column_id", -1, &st, NULL) != SQLITE_OK)
        return MCDC_E_IO;
    sqlite3_bind_text(st, 1, ct, -1, SQLITE_STATIC);
    int n = 0;
    while (sqlite3_step(st) == SQLITE_ROW) mcdc_buf_printf(out, NULL, "%s\"%s\"", n++ ? ", " : "", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return mcdc_buf_cstr(out, NULL);
}

static void type_meta(const sim_type *t, const char **name, int *charlen, int *prec, int *radix, int *scale, int *dtprec);

/* An ALTER COLUMN of a captured column reaches the instance's change table
 * when capture reads it: "if an existing column undergoes a change in its
 * data type, the change is propagated to the change table" (About change
 * data capture); sp_cdc_get_captured_columns then gives the new type ("only
 * the column data type changes", its documentation). */
static void follow_alter(sim_server *srv, sim_db *d, const char *ci, const char *col, const char *type) {
    sim_type t;
    if (!sim_type_parse(&t, type, strlen(type))) return;
    char ct[SIM_NAME_MAX + 8];
    snprintf(ct, sizeof ct, "cdc.%s_CT", ci);
    char *def = sqlite3_mprintf("\"%w\" %s", col, sim_type_decl(&t));
    char *conv = sqlite3_mprintf("sim_convert(\"%w\", '%q', NULL)", col, type);
    mcdc_error err = MCDC_ERROR_INIT;
    if (def && conv && sim_table_retype(d->w, ct, col, def, conv, &err) == MCDC_OK) {
        const char *tn;
        int cl, pr, rx, scl, dp;
        type_meta(&t, &tn, &cl, &pr, &rx, &scl, &dp);
        sim_sql(d->w, NULL, "UPDATE __sim_columns SET type = %Q WHERE tbl = %Q AND name = %Q", type, ct, col);
        sim_sql(d->w, NULL,
                "UPDATE \"cdc.captured_columns\" SET column_type = %Q, character_maximum_length = nullif(%d, -2),"
                " numeric_precision = nullif(%d, -2), numeric_precision_radix = nullif(%d, -2), numeric_scale = nullif(%d, -2),"
                " datetime_precision = nullif(%d, -2) WHERE capture_instance = %Q AND column_name = %Q",
                tn, cl, pr, rx, scl, dp, ci, col);
    } else
        mcdc_log(MCDC_LOG_WARN, "sim: capture instance %s: change table column %s keeps its type: %s", ci, col, err.message);
    sim_store_invalidate(srv->stores, d->name, ci); /* its cells were encoded for the old type */
    sqlite3_free(def);
    sqlite3_free(conv);
}

/* Posts the DDL committed up to hi to cdc.ddl_history, in LSN order (an
 * instance disabled meanwhile gets none). */
static void post_ddl(sim_server *srv, sim_db *d, const uint8_t hi[10]) {
    sqlite3 *w = d->w;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(w, "SELECT p.capture_instance, p.alter_col, p.alter_type FROM __sim_pending_ddl p JOIN"
                              " \"cdc.change_tables\" t ON t.capture_instance = p.capture_instance WHERE p.commit_lsn <= ?1 AND"
                              " p.alter_col IS NOT NULL ORDER BY p.ddl_lsn",
                           -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_blob(st, 1, hi, 10, SQLITE_STATIC);
        /* read first: a table rebuilt while the SELECT runs is locked */
        typedef struct { char ci[SIM_NAME_MAX], col[SIM_NAME_MAX], type[64]; } alt;
        alt *a = NULL;
        int n = 0, cap = 0;
        while (sqlite3_step(st) == SQLITE_ROW) {
            if (n == cap) {
                alt *na = mcdc_realloc(a, (size_t)(cap ? cap * 2 : 4) * sizeof *a);
                if (!na) break;
                a = na;
                cap = cap ? cap * 2 : 4;
            }
            snprintf(a[n].ci, sizeof a[n].ci, "%s", (const char *)sqlite3_column_text(st, 0));
            snprintf(a[n].col, sizeof a[n].col, "%s", (const char *)sqlite3_column_text(st, 1));
            snprintf(a[n].type, sizeof a[n].type, "%s", (const char *)sqlite3_column_text(st, 2));
            n++;
        }
        sqlite3_finalize(st);
        for (int k = 0; k < n; k++) follow_alter(srv, d, a[k].ci, a[k].col, a[k].type);
        mcdc_free(a);
    }
    const char *qs[] = {"INSERT INTO \"cdc.ddl_history\" SELECT p.source_object_id, p.object_id, p.required_column_update,"
                        " p.ddl_command, p.ddl_lsn, p.ddl_time, p.capture_instance FROM __sim_pending_ddl p JOIN"
                        " \"cdc.change_tables\" t ON t.capture_instance = p.capture_instance WHERE p.commit_lsn <= ?1"
                        " ORDER BY p.ddl_lsn",
                        "DELETE FROM __sim_pending_ddl WHERE commit_lsn <= ?1"};
    for (int k = 0; k < 2; k++)
        if (sqlite3_prepare_v2(w, qs[k], -1, &st, NULL) == SQLITE_OK) {
            sqlite3_bind_blob(st, 1, hi, 10, SQLITE_STATIC);
            sqlite3_step(st);
            sqlite3_finalize(st);
        }
}

/* Moves eligible pending transactions into the change tables (under mu, in
 * a SQLite transaction). Returns the number harvested. */
static int harvest(sim_server *srv, sim_db *d, bool ignore_latency, sim_scan_stats *x) {
    sqlite3 *w = d->w;
    int64_t now = sim_srv_utc_us(srv);
    int64_t limit = ignore_latency ? INT64_MAX : now - (int64_t)srv->capture_latency_ms * 1000;
    sqlite3_stmt *st;
    int n = 0;
    uint8_t hi[10], lo[10];
    if (sqlite3_prepare_v2(w, "SELECT commit_lsn, end_utc_us, begin_lsn FROM __sim_pending_tx ORDER BY commit_lsn LIMIT ?", -1,
                           &st, NULL) != SQLITE_OK)
        return 0;
    sqlite3_bind_int(st, 1, srv->capture_maxtrans > 0 ? srv->capture_maxtrans : 500);
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (sqlite3_column_int64(st, 1) > limit) break;
        memcpy(hi, sqlite3_column_blob(st, 0), 10);
        if (n == 0) {
            memcpy(lo, hi, 10);
            x->first_begin_lsn = sim_lsn_value(sqlite3_column_blob(st, 2), sqlite3_column_bytes(st, 2));
        }
        x->last_commit_utc_us = sqlite3_column_int64(st, 1);
        n++;
    }
    sqlite3_finalize(st);
    if (n == 0) return 0;
    x->tran_count = n;
    x->last_commit_lsn = sim_lsn_value(hi, 10);
    if (sqlite3_prepare_v2(w, "SELECT count(*) FROM __sim_pending_ddl p JOIN \"cdc.change_tables\" t ON t.capture_instance ="
                              " p.capture_instance WHERE p.commit_lsn <= ?1", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_blob(st, 1, hi, 10, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW) x->schema_changes = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
    }
    /* every instance: move rows up to hi */
    sqlite3_stmt *ci;
    if (sqlite3_prepare_v2(w, "SELECT capture_instance FROM \"cdc.change_tables\"", -1, &ci, NULL) == SQLITE_OK) {
        while (sqlite3_step(ci) == SQLITE_ROW) {
            const char *name = (const char *)sqlite3_column_text(ci, 0);
            mcdc_buf cols = {0};
            if (ct_columns(w, name, &cols) == MCDC_OK && cols.data) {
                char *q = sqlite3_mprintf("INSERT INTO \"cdc.%w_CT\"(%s) SELECT %s FROM \"__sim_pending.%w\" WHERE \"__$start_lsn\" <= ?1"
                                          " ORDER BY \"__$start_lsn\", \"__$command_id\", \"__$seqval\", \"__$operation\";",
                                          name, (const char *)cols.data, (const char *)cols.data, name);
                sqlite3_stmt *mv;
                int moved = 0;
                if (q && sqlite3_prepare_v2(w, q, -1, &mv, NULL) == SQLITE_OK) {
                    sqlite3_bind_blob(mv, 1, hi, 10, SQLITE_STATIC);
                    sqlite3_step(mv);
                    moved = sqlite3_changes(w);
                    sqlite3_finalize(mv);
                }
                sqlite3_free(q);
                /* the change store appends what lands after its last row
                 * on the next read; rows before it make it rebuild */
                if (moved > 0) sim_store_inserted(srv->stores, d->name, name, lo);
                x->commands += moved;
                q = sqlite3_mprintf("DELETE FROM \"__sim_pending.%w\" WHERE \"__$start_lsn\" <= ?1", name);
                if (q && sqlite3_prepare_v2(w, q, -1, &mv, NULL) == SQLITE_OK) {
                    sqlite3_bind_blob(mv, 1, hi, 10, SQLITE_STATIC);
                    sqlite3_step(mv);
                    sqlite3_finalize(mv);
                }
                sqlite3_free(q);
            }
            mcdc_buf_free(&cols);
        }
        sqlite3_finalize(ci);
    }
    post_ddl(srv, d, hi);
    const char *qs[] = {"INSERT OR IGNORE INTO \"cdc.lsn_time_mapping\" SELECT commit_lsn, begin_time, end_time, tran_id, begin_lsn"
                        " FROM __sim_pending_tx WHERE commit_lsn <= ?1 AND NOT coalesce(no_map, 0)",
                        "DELETE FROM __sim_pending_tx WHERE commit_lsn <= ?1"};
    for (int k = 0; k < 2; k++) {
        if (sqlite3_prepare_v2(w, qs[k], -1, &st, NULL) == SQLITE_OK) {
            sqlite3_bind_blob(st, 1, hi, 10, SQLITE_STATIC);
            sqlite3_step(st);
            sqlite3_finalize(st);
        }
    }
    return n;
}

static bool pending_empty(sqlite3 *w) {
    sqlite3_stmt *st;
    bool empty = true;
    if (sqlite3_prepare_v2(w, "SELECT 1 FROM __sim_pending_tx LIMIT 1", -1, &st, NULL) == SQLITE_OK) {
        empty = sqlite3_step(st) != SQLITE_ROW;
        sqlite3_finalize(st);
    }
    return empty;
}

/* Idle "dummy" mapping entries: one per ~305 s of quiet server time. */
static void idle_entries(sim_server *srv, sim_db *d) {
    sqlite3 *w = d->w;
    sqlite3_stmt *st;
    int64_t last = INT64_MIN;
    if (sqlite3_prepare_v2(w, "SELECT max(tran_end_time) FROM \"cdc.lsn_time_mapping\"", -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
            last = text_us((const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
    }
    if (last == INT64_MIN) {
        if (sqlite3_prepare_v2(w, "SELECT v FROM __sim_state WHERE k = 'cdc_enabled_local_us'", -1, &st, NULL) == SQLITE_OK) {
            if (sqlite3_step(st) == SQLITE_ROW) last = sqlite3_column_int64(st, 0);
            sqlite3_finalize(st);
        }
        if (last == INT64_MIN) return;
    }
    int64_t now_local = sim_srv_local_us(srv, sim_srv_utc_us(srv));
    int guard = 0;
    if (sqlite3_prepare_v2(w, "INSERT INTO \"cdc.lsn_time_mapping\" VALUES (?, ?, ?, zeroblob(10), zeroblob(10))", -1, &st, NULL) != SQLITE_OK)
        return;
    while (last + (int64_t)SIM_IDLE_ENTRY_S * 1000000 <= now_local && guard++ < 100000) {
        last += (int64_t)SIM_IDLE_ENTRY_S * 1000000;
        uint8_t lsn[10];
        sim_lsn_bytes(sim_lsn_next(d), lsn);
        char tt[48];
        sim_type t = {SIM_T_DATETIME, 0, 3, 0};
        sim_format_datetime(last, &t, tt);
        sqlite3_reset(st);
        sqlite3_bind_blob(st, 1, lsn, 10, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 2, tt, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 3, tt, -1, SQLITE_TRANSIENT);
        sqlite3_step(st);
    }
    sqlite3_finalize(st);
    sim_db_state_put(d, "lsn", (int64_t)d->lsn);
}

/* Removes rows below each instance's new low water mark. */
static void cleanup_to(sim_server *srv, sim_db *d, const char *ci, const uint8_t low[10]) {
    sqlite3 *w = d->w;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(w, "UPDATE \"cdc.change_tables\" SET start_lsn = ?1 WHERE capture_instance = ?2 AND (start_lsn IS NULL OR start_lsn < ?1)",
                           -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_blob(st, 1, low, 10, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, ci, -1, SQLITE_STATIC);
        sqlite3_step(st);
        sqlite3_finalize(st);
    }
    /* min_lsn has moved: the store's rows below it go, then SQLite's */
    sim_store_trim(srv->stores, d->name, ci, low);
    char *q = sqlite3_mprintf("DELETE FROM \"cdc.%w_CT\" WHERE \"__$start_lsn\" < (SELECT start_lsn FROM \"cdc.change_tables\" WHERE capture_instance = %Q)", ci, ci);
    if (q) sqlite3_exec(w, q, NULL, NULL, NULL);
    sqlite3_free(q);
    sqlite3_exec(w, "DELETE FROM \"cdc.lsn_time_mapping\" WHERE start_lsn < (SELECT min(start_lsn) FROM \"cdc.change_tables\")"
                    " AND (SELECT count(*) FROM \"cdc.change_tables\" WHERE start_lsn IS NULL) = 0",
                 NULL, NULL, NULL);
}

static void retention(sim_server *srv, sim_db *d) {
    if (d->retention_min <= 0) return;
    int64_t cutoff = sim_srv_local_us(srv, sim_srv_utc_us(srv)) - d->retention_min * 60 * 1000000;
    sim_type t = {SIM_T_DATETIME, 0, 3, 0};
    char ct[48];
    sim_format_datetime(cutoff, &t, ct);
    sqlite3_stmt *st;
    uint8_t low[10];
    bool have = false;
    if (sqlite3_prepare_v2(d->w, "SELECT max(start_lsn) FROM \"cdc.lsn_time_mapping\" WHERE tran_end_time <= ?", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, ct, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_bytes(st, 0) == 10) {
            memcpy(low, sqlite3_column_blob(st, 0), 10);
            have = true;
        }
        sqlite3_finalize(st);
    }
    if (!have) return;
    char names[16][SIM_NAME_MAX];
    int n = 0;
    if (sqlite3_prepare_v2(d->w, "SELECT capture_instance FROM \"cdc.change_tables\" WHERE start_lsn < ?", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_blob(st, 1, low, 10, SQLITE_STATIC);
        while (sqlite3_step(st) == SQLITE_ROW && n < 16) snprintf(names[n++], SIM_NAME_MAX, "%s", (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
    }
    for (int k = 0; k < n; k++) cleanup_to(srv, d, names[k], low);
}

/* One scan of every CDC database; housekeeping adds idle entries and
 * retention. Returns true when work is left (queued transactions, a
 * database that was busy). */
/* Has the database a capture instance (SQL Server creates the capture job
 * with the first)? */
static bool has_instances(sqlite3 *w) {
    sqlite3_stmt *st;
    bool yes = false;
    if (sqlite3_prepare_v2(w, "SELECT 1 FROM \"cdc.change_tables\" LIMIT 1", -1, &st, NULL) == SQLITE_OK) {
        yes = sqlite3_step(st) == SQLITE_ROW;
        sqlite3_finalize(st);
    }
    return yes;
}

/* The first queued commit LSN (0: none). */
static uint64_t first_pending(sqlite3 *w) {
    sqlite3_stmt *st;
    uint64_t v = 0;
    if (sqlite3_prepare_v2(w, "SELECT min(commit_lsn) FROM __sim_pending_tx", -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_bytes(st, 0) == 10) v = sim_lsn_value(sqlite3_column_blob(st, 0), 10);
        sqlite3_finalize(st);
    }
    return v;
}

/* One capture session of database d (its capture job running): an
 * injected capture_error fails it before anything moves. Returns the
 * transactions moved. */
static int capture_session(sim_server *srv, sim_db *d, bool ignore_latency) {
    sim_scan_stats x = {0};
    x.start_utc_us = sim_srv_utc_us(srv);
    x.last_commit_utc_us = INT64_MIN;
    int n = 0;
    if (sim_fault_capture_error(srv, &x.error_number)) {
        x.failed = true;
        x.failed_lsn = first_pending(d->w);
        x.error_message = x.error_number == 22859
                              ? "Log Scan process failed in processing log records. Refer to previous errors in the current"
                                " session to identify the cause and correct any associated problems."
                              : "The capture job failed (sim.fault capture_error).";
    } else {
        /* the capture process picks up new instances: min_lsn becomes their enable LSN */
        sqlite3_exec(d->w, "UPDATE \"cdc.change_tables\" SET start_lsn = enable_lsn WHERE start_lsn IS NULL", NULL, NULL, NULL);
        n = harvest(srv, d, ignore_latency, &x);
    }
    sim_caplog_session(srv, d, &x);
    return x.failed ? -1 : n;
}

static bool scan(sim_server *srv, bool ignore_latency, bool housekeeping) {
    bool left = false;
    for (sim_db *d = srv->dbs; d; d = d->next) {
        if (!d->cdc_enabled) continue;
        if (d->capture_stopped && (d->cleanup_stopped || !housekeeping)) continue;
        if (sqlite3_exec(d->w, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
            left = true;
            continue;
        }
        d->auth.trusted = true; /* harvest and retention tell the change store themselves */
        /* a stopped capture job scans nothing, writes no idle entries and
         * no session; a stopped cleanup job applies no retention */
        int n = d->capture_stopped ? -1 : has_instances(d->w) ? capture_session(srv, d, ignore_latency) : 0;
        bool empty = pending_empty(d->w);
        if (!empty && !d->capture_stopped) left = true;
        if (housekeeping && n == 0 && empty) idle_entries(srv, d);
        if (housekeeping && !d->cleanup_stopped) retention(srv, d);
        d->auth.trusted = false;
        sqlite3_exec(d->w, "COMMIT", NULL, NULL, NULL);
    }
    return left;
}

void sim_cdc_scan(sim_server *srv, bool ignore_latency) { (void)scan(srv, ignore_latency, true); }

void sim_cdc_wake(sim_server *srv) {
    atomic_fetch_add(&capture_work, 1);
    if (srv->cap_started) pthread_cond_broadcast(&srv->cap_cv);
}

void *sim_cdc_thread(void *arg) {
    mcdc_log_use(&g_sim_log_sink);
    sim_server *srv = arg;
    uint64_t seen = 0;
    bool left = true;
    int64_t house_us = INT64_MIN;
    pthread_mutex_lock(&srv->mu);
    while (!srv->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t ns = ts.tv_nsec + (int64_t)srv->capture_poll_ms * 1000000;
        ts.tv_sec += (time_t)(ns / 1000000000);
        ts.tv_nsec = (long)(ns % 1000000000);
        pthread_cond_timedwait(&srv->cap_cv, &srv->mu, &ts);
        if (srv->stop) break;
        /* nothing committed since a scan that left nothing queued, and
         * no housekeeping due: no scan (no write transaction, no query) */
        uint64_t work = atomic_load(&capture_work);
        int64_t now = mcdc_monotonic_us();
        bool house = house_us == INT64_MIN || now - house_us >= CDC_HOUSEKEEPING_US;
        if (!left && work == seen && !house) continue;
        if (house) house_us = now;
        left = scan(srv, false, house);
        seen = work;
    }
    pthread_mutex_unlock(&srv->mu);
    return NULL;
}

/* ---- DDL on captured tables ------------------------------------------------------ */
int sim_cdc_ddl(sim_session *s, const char *tbl, const char *ddl_text, const char *alter_col, const sim_type *new_type,
                mcdc_error *err) {
    sim_db *d = s->db;
    sim_tran_log_start(s); /* the DDL is in the transaction, between its begin and commit LSNs */
    uint8_t lsn[10];
    sim_lsn_bytes(sim_lsn_next(d), lsn);
    char now[48], tn[64] = "";
    local_text(s->srv, sim_srv_utc_us(s->srv), now);
    if (alter_col) sim_type_format(new_type, tn, sizeof tn);
    /* per instance: an ALTER COLUMN of a column it captures (the same
     * column_id) to another type requires its change table's column to
     * change (required_column_update) */
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(d->w, "INSERT INTO __sim_pending_ddl SELECT ?1, NULL, ?2, ?3, ?4, t.source_object_id, t.object_id,"
                                 " c.column_name IS NOT NULL, t.capture_instance, c.column_name, CASE WHEN c.column_name IS NOT NULL"
                                 " THEN ?6 END FROM \"cdc.change_tables\" t LEFT JOIN \"cdc.captured_columns\" c ON"
                                 " c.capture_instance = t.capture_instance AND ?5 IS NOT NULL AND c.column_name = ?5 AND c.column_id ="
                                 " (SELECT column_id FROM __sim_columns WHERE tbl = t.source_name AND name = ?5) AND"
                                 " (SELECT type FROM __sim_columns WHERE tbl = 'cdc.' || t.capture_instance || '_CT' AND"
                                 " name = ?5) <> ?6 WHERE t.source_name = ?7",
                           -1, &st, NULL) != SQLITE_OK)
        return sim_sqlite_err(d->w, SQLITE_ERROR, err);
    sqlite3_bind_int64(st, 1, (int64_t)s->tran_id);
    sqlite3_bind_blob(st, 2, lsn, 10, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 3, now, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 4, ddl_text, -1, SQLITE_STATIC);
    if (alter_col) sqlite3_bind_text(st, 5, alter_col, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 6, tn, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 7, tbl, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st) == SQLITE_DONE ? MCDC_OK : sim_sqlite_err(d->w, SQLITE_ERROR, err);
    sqlite3_finalize(st);
    if (rc == MCDC_OK) s->tran_cdc = true; /* the commit stamps it and queues the transaction */
    if (rc == MCDC_OK) rc = sim_db_state_put(d, "lsn", (int64_t)d->lsn);
    atomic_fetch_add(&capture_work, 1);
    return rc;
}

static int drop_instance(sim_db *d, const char *ci, mcdc_error *err) {
    return sim_sql(d->w, err,
                   "DROP TABLE IF EXISTS \"cdc.%w_CT\"; DROP TABLE IF EXISTS \"__sim_pending.%w\";"
                   "DELETE FROM __sim_columns WHERE tbl = 'cdc.' || %Q || '_CT';"
                   "DELETE FROM __sim_tables WHERE name = 'cdc.' || %Q || '_CT';"
                   "DELETE FROM __sim_grants WHERE object = 'cdc.' || %Q || '_CT';"
                   "DELETE FROM \"cdc.captured_columns\" WHERE capture_instance = %Q;"
                   "DELETE FROM \"cdc.index_columns\" WHERE capture_instance = %Q;"
                   "DELETE FROM \"cdc.ddl_history\" WHERE capture_instance = %Q;"
                   "DELETE FROM __sim_pending_ddl WHERE capture_instance = %Q;"
                   "DELETE FROM \"cdc.change_tables\" WHERE capture_instance = %Q;",
                   ci, ci, ci, ci, ci, ci, ci, ci, ci, ci);
}

int sim_cdc_drop_table(sim_session *s, const char *tbl, mcdc_error *err) {
    sqlite3_stmt *st;
    char names[8][SIM_NAME_MAX];
    int n = 0, rc = MCDC_OK;
    if (sqlite3_prepare_v2(s->db->w, "SELECT capture_instance FROM \"cdc.change_tables\" WHERE source_name = ?", -1, &st, NULL) != SQLITE_OK)
        return sim_sqlite_err(s->db->w, SQLITE_ERROR, err);
    sqlite3_bind_text(st, 1, tbl, -1, SQLITE_STATIC);
    while (sqlite3_step(st) == SQLITE_ROW && n < 8) snprintf(names[n++], SIM_NAME_MAX, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    for (int k = 0; k < n && rc == MCDC_OK; k++) rc = drop_instance(s->db, names[k], err);
    return rc;
}

/* ---- procedures ------------------------------------------------------------------ */
static int emit_sql(sim_session *s, const sim_sink *sink, const char *sql, const char *b1, const char *b2,
                    const sim_column *cols, int ncols, mcdc_error *err) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->rd, sql, -1, &st, NULL) != SQLITE_OK) return sim_sqlite_err(s->rd, SQLITE_ERROR, err);
    if (b1) sqlite3_bind_text(st, 1, b1, -1, SQLITE_TRANSIENT);
    if (b2) sqlite3_bind_text(st, 2, b2, -1, SQLITE_TRANSIENT);
    int64_t rows = 0;
    bool aborted = false;
    int first = sqlite3_step(st);
    int rc = sim_emit_stmt(s, s->rd, st, first, NULL, cols, ncols, sink, true, &rows, err, &aborted);
    sqlite3_finalize(st);
    if (rc == MCDC_OK && !aborted && sink->done) aborted = sink->done(sink->ctx, rows, true, true, false) != 0;
    return aborted ? MCDC_E_CANCELLED : rc;
}

static sim_type T(const char *s) {
    sim_type t;
    sim_type_parse(&t, s, strlen(s));
    return t;
}

int sim_cdc_need_db(sim_session *s, mcdc_error *err) {
    if (s->db->cdc_enabled) return MCDC_OK;
    return sim_err(err, 22901,
                   "The database '%s' is not enabled for Change Data Capture. Ensure that the correct database context is set and retry the operation. To report on the databases enabled for Change Data Capture, query the is_cdc_enabled column in the sys.databases catalog view.",
                   s->db->name);
}

static void type_meta(const sim_type *t, const char **name, int *charlen, int *prec, int *radix, int *scale, int *dtprec) {
    static const char *N[] = {"", "bit", "tinyint", "smallint", "int", "bigint", "real", "float", "decimal", "money",
                              "smallmoney", "date", "time", "datetime", "smalldatetime", "datetime2", "datetimeoffset",
                              "char", "varchar", "nchar", "nvarchar", "binary", "varbinary", "uniqueidentifier", "sql_variant",
                              "xml", "hierarchyid", "geography", "geometry"};
    _Static_assert(sizeof N / sizeof N[0] == SIM_T_GEOMETRY + 1, "a name for every type");
    *name = N[t->id];
    *charlen = -2; /* NULL */
    *prec = *radix = *scale = *dtprec = -2;
    switch (t->id) {
    case SIM_T_TINYINT: *prec = 3; *radix = 10; *scale = 0; break;
    case SIM_T_SMALLINT: *prec = 5; *radix = 10; *scale = 0; break;
    case SIM_T_INT: *prec = 10; *radix = 10; *scale = 0; break;
    case SIM_T_BIGINT: *prec = 19; *radix = 10; *scale = 0; break;
    case SIM_T_REAL: *prec = 24; *radix = 2; break;
    case SIM_T_FLOAT: *prec = 53; *radix = 2; break;
    case SIM_T_DECIMAL: case SIM_T_MONEY: case SIM_T_SMALLMONEY: *prec = t->precision; *radix = 10; *scale = t->scale; break;
    case SIM_T_DATE: *dtprec = 0; break;
    case SIM_T_TIME: case SIM_T_DATETIME2: case SIM_T_DATETIMEOFFSET: *dtprec = t->scale; break;
    case SIM_T_DATETIME: *dtprec = 3; break;
    case SIM_T_SMALLDATETIME: *dtprec = 0; break;
    case SIM_T_CHAR: case SIM_T_VARCHAR: case SIM_T_NCHAR: case SIM_T_NVARCHAR: case SIM_T_BINARY: case SIM_T_VARBINARY:
        *charlen = t->length;
        break;
    case SIM_T_XML: *charlen = -1; break; /* as INFORMATION_SCHEMA gives xml's: -1 */
    default: break;
    }
}

/* Does table tbl have a UNIQUE constraint (its SQLite index)? */
static bool has_unique_index(sqlite3 *w, const char *tbl) {
    sqlite3_stmt *st;
    bool yes = false;
    if (sqlite3_prepare_v2(w, "SELECT 1 FROM pragma_index_list(?) WHERE \"unique\" = 1", -1, &st, NULL) != SQLITE_OK) return false;
    sqlite3_bind_text(st, 1, tbl, -1, SQLITE_STATIC);
    yes = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return yes;
}

static int enable_table(sim_session *s, const sim_proc_args *a, mcdc_error *err) {
    sim_db *d = s->db;
    const char *schema = sim_arg_text(a, "@source_schema", 0), *table = sim_arg_text(a, "@source_name", 1);
    const char *role = sim_arg_text(a, "@role_name", 2), *ci_arg = sim_arg_text(a, "@capture_instance", 3);
    const char *cols_arg = sim_arg_text(a, "@captured_column_list", -1), *index = sim_arg_text(a, "@index_name", -1);
    const char *net = sim_arg_text(a, "@supports_net_changes", -1);
    if (!schema || !table) return sim_err(err, 201, "Procedure or function 'sp_cdc_enable_table' expects parameter '@source_schema', which was not supplied.");
    int rc = sim_cdc_need_db(s, err);
    if (rc != MCDC_OK) return rc;
    char tbl[SIM_NAME_MAX * 2], ci[SIM_NAME_MAX];
    snprintf(tbl, sizeof tbl, "%s.%s", schema, table);
    if (ci_arg && ci_arg[0]) snprintf(ci, sizeof ci, "%s", ci_arg);
    else snprintf(ci, sizeof ci, "%s_%s", schema, table);
    sqlite3 *w = d->w;
    sqlite3_stmt *st;
    int src_id = 0, ninst = 0;
    if (sqlite3_prepare_v2(w, "SELECT object_id FROM __sim_tables WHERE name = ?", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, tbl, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW) src_id = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
    }
    if (!src_id || mcdc_str_nieq(schema, "cdc", 4) || mcdc_str_nieq(schema, "sys", 4))
        return sim_err(err, 22931, "Source table '%s.%s' does not exist in the current database. Ensure that the correct database context is set. Specify a valid schema and table name for the database.", schema, table);
    if (sqlite3_prepare_v2(w, "SELECT (SELECT count(*) FROM \"cdc.change_tables\" WHERE source_name = ?1),"
                              " (SELECT count(*) FROM \"cdc.change_tables\" WHERE capture_instance = ?2)", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, tbl, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, ci, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW) {
            ninst = sqlite3_column_int(st, 0);
            if (sqlite3_column_int(st, 1) > 0) rc = sim_err(err, 22926, "Could not create a capture instance because the capture instance name '%s' already exists in the current database. Specify an explicit unique name for the parameter @capture_instance.", ci);
        }
        sqlite3_finalize(st);
    }
    if (rc != MCDC_OK) return rc;
    if (ninst >= MCDC_SIM_CAPTURE_INSTANCES_PER_TABLE)
        return sim_err(err, 22962, "Two capture instances already exist for source table '%s.%s'. A table can have at most two capture instances. If the current tracking options are not appropriate, disable change tracking for the obsolete instance by using sys.sp_cdc_disable_table and retry the operation.", schema, table);
    /* source columns */
    typedef struct { char name[SIM_NAME_MAX]; int id, pk; sim_type t; char tt[64]; bool nul, computed; } scol;
    scol *sc = mcdc_calloc(MCDC_COLUMNS_MAX, sizeof *sc);
    if (!sc) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    int nsc = 0, npk = 0;
    if (sqlite3_prepare_v2(w, "SELECT c.name, c.column_id, c.pk_ordinal, c.type, c.nullable, k.name IS NOT NULL FROM __sim_columns c"
                              " LEFT JOIN __sim_computed k ON k.tbl = c.tbl AND k.name = c.name WHERE c.tbl = ? ORDER BY c.column_id",
                           -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, tbl, -1, SQLITE_STATIC);
        while (sqlite3_step(st) == SQLITE_ROW && nsc < MCDC_COLUMNS_MAX) {
            scol *c = &sc[nsc++];
            snprintf(c->name, sizeof c->name, "%s", (const char *)sqlite3_column_text(st, 0));
            c->id = sqlite3_column_int(st, 1);
            c->pk = sqlite3_column_int(st, 2);
            snprintf(c->tt, sizeof c->tt, "%s", (const char *)sqlite3_column_text(st, 3));
            c->t = T(c->tt);
            c->nul = sqlite3_column_int(st, 4) != 0;
            c->computed = sqlite3_column_int(st, 5) != 0;
            if (c->pk) npk++;
        }
        sqlite3_finalize(st);
    }
    if (index && index[0] && npk == 0 && !has_unique_index(w, tbl)) { /* a heap has no index to name */
        mcdc_free(sc);
        return sim_err(err, 22928, "Index name '%s' is not an index for table '%s.%s'. Specify a valid index name for the table.",
                       index, schema, table);
    }
    if (net && atoi(net) == 1 && npk == 0 && !index) {
        mcdc_free(sc);
        return sim_err(err, 22939, "The parameter @supports_net_changes is set to 1, but the source table does not have a primary key defined and no alternate unique index has been specified.");
    }
    /* captured column selection */
    bool *cap = mcdc_calloc((size_t)nsc + 1, sizeof *cap);
    if (!cap) { mcdc_free(sc); return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory"); }
    if (cols_arg && cols_arg[0]) {
        const char *p = cols_arg;
        while (*p) {
            while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n') p++;
            if (!*p) break;
            char nm[SIM_NAME_MAX];
            size_t k = 0;
            if (*p == '[') {
                p++;
                while (*p && *p != ']' && k < sizeof nm - 1) nm[k++] = *p++;
                if (*p == ']') p++;
            } else {
                while (*p && *p != ',' && k < sizeof nm - 1) nm[k++] = *p++;
                while (k > 0 && nm[k - 1] == ' ') k--;
            }
            nm[k] = 0;
            bool found = false;
            for (int c = 0; c < nsc; c++) if (mcdc_str_ieq(sc[c].name, nm)) { cap[c] = true; found = true; }
            if (!found) {
                mcdc_free(sc);
                mcdc_free(cap);
                return sim_err(err, 22916, "Could not find column '%s' in source table '%s.%s'. Verify that the column name is correct.", nm, schema, table);
            }
        }
        for (int c = 0; c < nsc; c++)
            if (sc[c].pk && !cap[c]) {
                mcdc_free(sc);
                mcdc_free(cap);
                return sim_err(err, 22945, "Could not add column information to the cdc.captured_columns system table for source table '%s.%s'. The index column '%s' must be in the captured column list.", schema, table, sc[c].name);
            }
    } else for (int c = 0; c < nsc; c++) cap[c] = true;
    /* build DDL */
    mcdc_buf ct = {0}, pend = {0}, capl = {0}, idxl = {0};
    mcdc_buf_printf(&ct, NULL, "CREATE TABLE \"cdc.%s_CT\"(\"__$start_lsn\" BLOB NOT NULL, \"__$end_lsn\" BLOB, \"__$seqval\" BLOB NOT NULL,"
                               " \"__$operation\" INT NOT NULL, \"__$update_mask\" BLOB", ci);
    int ord = 0;
    for (int c = 0; c < nsc; c++) {
        if (!cap[c]) continue;
        mcdc_buf_printf(&ct, NULL, ", \"%s\" %s", sc[c].name, sim_type_decl(&sc[c].t));
        mcdc_buf_printf(&capl, NULL, "%s[%s]", ord++ ? ", " : "", sc[c].name);
    }
    for (int p = 1; p <= npk; p++)
        for (int c = 0; c < nsc; c++) if (sc[c].pk == p) mcdc_buf_printf(&idxl, NULL, "%s[%s]", p > 1 ? ", " : "", sc[c].name);
    mcdc_buf_cstr(&capl, NULL);
    mcdc_buf_cstr(&idxl, NULL);
    mcdc_buf_append_str(&pend, (const char *)ct.data, NULL);
    /* clustered on the reader's order: the ordered read is a plain scan */
    mcdc_buf_append_str(&ct, ", \"__$command_id\" INT NOT NULL, PRIMARY KEY(\"__$start_lsn\", \"__$command_id\","
                             " \"__$seqval\", \"__$operation\")) WITHOUT ROWID", NULL);
    mcdc_buf_cstr(&ct, NULL);
    /* pending: same columns + tx key, start LSN nullable until commit */
    mcdc_buf_reset(&pend);
    mcdc_buf_printf(&pend, NULL, "CREATE TABLE \"__sim_pending.%s\"(\"__$start_lsn\" BLOB, \"__$end_lsn\" BLOB, \"__$seqval\" BLOB,"
                                 " \"__$operation\" INT, \"__$update_mask\" BLOB", ci);
    for (int c = 0; c < nsc; c++) if (cap[c]) mcdc_buf_printf(&pend, NULL, ", \"%s\" %s", sc[c].name, sim_type_decl(&sc[c].t));
    mcdc_buf_append_str(&pend, ", \"__$command_id\" INT, \"__$txkey\" INT)", NULL);
    mcdc_buf_cstr(&pend, NULL);
    uint8_t enable_lsn[10];
    sim_lsn_bytes(sim_lsn_next(d), enable_lsn);
    char now[48];
    local_text(s->srv, sim_srv_utc_us(s->srv), now);
    int ct_id = (int)(sqlite3_last_insert_rowid(w) % 1000000) + 1509580416;
    rc = sim_sql(w, err, "%s", (const char *)ct.data);
    if (rc == MCDC_OK) rc = sim_sql(w, err, "%s", (const char *)pend.data);
    if (rc == MCDC_OK)
        rc = sim_sql(w, err,
                     "CREATE INDEX \"__sim_pending.%w_tx\" ON \"__sim_pending.%w\"(\"__$txkey\");"
                     "CREATE INDEX \"__sim_pending.%w_lsn\" ON \"__sim_pending.%w\"(\"__$start_lsn\");",
                     ci, ci, ci, ci);
    if (rc == MCDC_OK) {
        const char *meta[][2] = {{"__$start_lsn", "binary(10)"}, {"__$end_lsn", "binary(10)"}, {"__$seqval", "binary(10)"},
                                 {"__$operation", "int"}, {"__$update_mask", "varbinary(128)"}};
        int id = 1;
        for (int k = 0; k < 5 && rc == MCDC_OK; k++)
            rc = sim_sql(w, err, "INSERT INTO __sim_columns VALUES ('cdc.' || %Q || '_CT', %d, %Q, %Q, %d, 0)", ci, id++, meta[k][0], meta[k][1], k == 1 || k == 4);
        ord = 0;
        for (int c = 0; c < nsc && rc == MCDC_OK; c++) {
            if (!cap[c]) continue;
            ord++;
            rc = sim_sql(w, err, "INSERT INTO __sim_columns VALUES ('cdc.' || %Q || '_CT', %d, %Q, %Q, 1, 0)", ci, id++, sc[c].name, sc[c].tt);
            const char *tn;
            int cl, pr, rx, scl, dp;
            type_meta(&sc[c].t, &tn, &cl, &pr, &rx, &scl, &dp);
            if (rc == MCDC_OK)
                rc = sim_sql(w, err,
                             "INSERT INTO \"cdc.captured_columns\" VALUES (%d, %Q, %d, %Q, %d, %d, %Q, nullif(%d, -2), nullif(%d, -2), nullif(%d, -2), nullif(%d, -2), nullif(%d, -2))",
                             ct_id, sc[c].name, sc[c].id, tn, ord, sc[c].computed ? 1 : 0, ci, cl, pr, rx, scl, dp);
        }
        if (rc == MCDC_OK) rc = sim_sql(w, err, "INSERT INTO __sim_columns VALUES ('cdc.' || %Q || '_CT', %d, '__$command_id', 'int', 0, 0)", ci, id);
        for (int p = 1; p <= npk && rc == MCDC_OK; p++)
            for (int c = 0; c < nsc; c++)
                if (sc[c].pk == p)
                    rc = sim_sql(w, err, "INSERT INTO \"cdc.index_columns\" VALUES (%d, %Q, %d, %d, %Q)", ct_id, sc[c].name, p, sc[c].id, ci);
        if (rc == MCDC_OK)
            rc = sim_sql(w, err, "INSERT INTO __sim_tables VALUES ('cdc.' || %Q || '_CT', 'cdc', %Q || '_CT', %d, %Q, 0);"
                                 "UPDATE __sim_tables SET is_cdc = 1 WHERE name = %Q",
                         ci, ci, ct_id, now, tbl);
        if (rc == MCDC_OK) {
            if (sqlite3_prepare_v2(w, "INSERT INTO \"cdc.change_tables\" VALUES (?1, 0, ?2, ?3, NULL, NULL, ?4, 0, ?5, ?6, NULL, ?7, 0, ?8, ?9, ?10, ?11, ?12, ?13)",
                                   -1, &st, NULL) == SQLITE_OK) {
                sqlite3_bind_int(st, 1, ct_id);
                sqlite3_bind_int(st, 2, src_id);
                sqlite3_bind_text(st, 3, ci, -1, SQLITE_STATIC);
                sqlite3_bind_int(st, 4, net ? atoi(net) : (npk > 0));
                if (role) sqlite3_bind_text(st, 5, role, -1, SQLITE_STATIC);
                if (index) sqlite3_bind_text(st, 6, index, -1, SQLITE_STATIC);
                else if (npk) { char pkn[SIM_NAME_MAX]; snprintf(pkn, sizeof pkn, "PK_%s", table); sqlite3_bind_text(st, 6, pkn, -1, SQLITE_TRANSIENT); }
                sqlite3_bind_text(st, 7, now, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 8, schema, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 9, table, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 10, tbl, -1, SQLITE_STATIC);
                sqlite3_bind_blob(st, 11, enable_lsn, 10, SQLITE_STATIC);
                if (npk) sqlite3_bind_text(st, 12, (const char *)idxl.data, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 13, capl.data ? (const char *)capl.data : "", -1, SQLITE_STATIC);
                if (sqlite3_step(st) != SQLITE_DONE) rc = sim_sqlite_err(w, SQLITE_ERROR, err);
                sqlite3_finalize(st);
            } else rc = sim_sqlite_err(w, SQLITE_ERROR, err);
        }
    }
    if (rc == MCDC_OK) rc = sim_db_state_put(d, "lsn", (int64_t)d->lsn);
    atomic_fetch_add(&capture_work, 1); /* the capture scan sets its min_lsn */
    mcdc_buf_free(&ct);
    mcdc_buf_free(&pend);
    mcdc_buf_free(&capl);
    mcdc_buf_free(&idxl);
    mcdc_free(sc);
    mcdc_free(cap);
    return rc;
}

static int disable_table(sim_session *s, const sim_proc_args *a, mcdc_error *err) {
    const char *schema = sim_arg_text(a, "@source_schema", 0), *table = sim_arg_text(a, "@source_name", 1);
    const char *ci = sim_arg_text(a, "@capture_instance", 2);
    if (!schema || !table || !ci) return sim_err(err, 201, "Procedure or function 'sp_cdc_disable_table' expects parameters '@source_schema', '@source_name' and '@capture_instance'.");
    int rc = sim_cdc_need_db(s, err);
    if (rc != MCDC_OK) return rc;
    char tbl[SIM_NAME_MAX * 2];
    snprintf(tbl, sizeof tbl, "%s.%s", schema, table);
    sqlite3_stmt *st;
    char names[8][SIM_NAME_MAX];
    int n = 0;
    if (sqlite3_prepare_v2(s->db->w, "SELECT capture_instance FROM \"cdc.change_tables\" WHERE source_name = ?1 AND (lower(?2) = 'all' OR capture_instance = ?2)",
                           -1, &st, NULL) != SQLITE_OK)
        return sim_sqlite_err(s->db->w, SQLITE_ERROR, err);
    sqlite3_bind_text(st, 1, tbl, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, ci, -1, SQLITE_STATIC);
    while (sqlite3_step(st) == SQLITE_ROW && n < 8) snprintf(names[n++], SIM_NAME_MAX, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    if (n == 0)
        return sim_err(err, 22960, "Change data capture instance '%s' has not been enabled for the source table '%s.%s'. Use sys.sp_cdc_help_change_data_capture to verify the capture instance name and retry the operation.", ci, schema, table);
    for (int k = 0; k < n && rc == MCDC_OK; k++) rc = drop_instance(s->db, names[k], err);
    if (rc == MCDC_OK && !sim_cdc_table_captured(s->db, tbl))
        rc = sim_sql(s->db->w, err, "UPDATE __sim_tables SET is_cdc = 0 WHERE name = %Q", tbl);
    return rc;
}

static int help_cdc(sim_session *s, const sim_proc_args *a, const sim_sink *sink, mcdc_error *err) {
    const char *schema = sim_arg_text(a, "@source_schema", 0), *table = sim_arg_text(a, "@source_name", 1);
    sim_column cols[] = {
        {"source_schema", T("sysname"), false}, {"source_table", T("sysname"), false},
        {"capture_instance", T("sysname"), false}, {"object_id", T("int"), false},
        {"source_object_id", T("int"), false}, {"start_lsn", T("binary(10)"), true},
        {"end_lsn", T("binary(10)"), true}, {"supports_net_changes", T("bit"), true},
        {"has_drop_pending", T("bit"), true}, {"role_name", T("sysname"), true},
        {"index_name", T("sysname"), true}, {"filegroup_name", T("sysname"), true},
        {"create_date", T("datetime"), true}, {"index_column_list", T("nvarchar(max)"), true},
        {"captured_column_list", T("nvarchar(max)"), true},
    };
    char *q = sqlite3_mprintf(
        "SELECT source_schema, source_table, capture_instance, object_id, source_object_id, start_lsn, end_lsn,"
        " supports_net_changes, has_drop_pending, role_name, index_name, filegroup_name, create_date, index_column_list,"
        " captured_column_list FROM \"cdc.change_tables\" WHERE (?1 IS NULL OR source_schema = ?1 COLLATE NOCASE)"
        " AND (?2 IS NULL OR source_table = ?2 COLLATE NOCASE) AND (%d OR sim_has_perms('[' || source_schema || '].[' ||"
        " source_table || ']', 'OBJECT', 'SELECT', %Q, 0) = 1) ORDER BY source_schema, source_table, create_date, coalesce(start_lsn, enable_lsn)",
        s->admin ? 1 : 0, s->login);
    int rc = emit_sql(s, sink, q, schema, table, cols, (int)(sizeof cols / sizeof cols[0]), err);
    sqlite3_free(q);
    return rc;
}

static int captured_columns(sim_session *s, const sim_proc_args *a, const sim_sink *sink, mcdc_error *err) {
    const char *ci = sim_arg_text(a, "@capture_instance", 0);
    if (!ci) return sim_err(err, 201, "Procedure or function 'sp_cdc_get_captured_columns' expects parameter '@capture_instance', which was not supplied.");
    sim_column cols[] = {
        {"source_schema", T("sysname"), false}, {"source_table", T("sysname"), false},
        {"capture_instance", T("sysname"), false}, {"column_name", T("sysname"), false},
        {"column_id", T("int"), true}, {"column_ordinal", T("int"), false}, {"data_type", T("sysname"), false},
        {"character_maximum_length", T("int"), true}, {"numeric_precision", T("tinyint"), true},
        {"numeric_precision_radix", T("smallint"), true}, {"numeric_scale", T("int"), true},
        {"datetime_precision", T("smallint"), true},
    };
    char *q = sqlite3_mprintf(
        "SELECT t.source_schema, t.source_table, c.capture_instance, c.column_name, c.column_id, c.column_ordinal,"
        " c.column_type, c.character_maximum_length, c.numeric_precision, c.numeric_precision_radix, c.numeric_scale,"
        " c.datetime_precision FROM \"cdc.captured_columns\" c JOIN \"cdc.change_tables\" t ON t.capture_instance ="
        " c.capture_instance WHERE c.capture_instance = ?1 AND (%d OR sim_has_perms('[' || t.source_schema || '].[' ||"
        " t.source_table || ']', 'OBJECT', 'SELECT', %Q, 0) = 1) ORDER BY c.column_ordinal",
        s->admin ? 1 : 0, s->login);
    sqlite3_stmt *st;
    bool exists = false;
    if (sqlite3_prepare_v2(s->rd, "SELECT 1 FROM \"cdc.change_tables\" WHERE capture_instance = ?", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, ci, -1, SQLITE_STATIC);
        exists = sqlite3_step(st) == SQLITE_ROW;
        sqlite3_finalize(st);
    }
    int rc;
    if (!exists)
        rc = sim_err(err, 22964, "The capture instance '%s' does not exist in the current database.", ci);
    else rc = emit_sql(s, sink, q, ci, NULL, cols, (int)(sizeof cols / sizeof cols[0]), err);
    sqlite3_free(q);
    return rc;
}

static int ddl_history(sim_session *s, const sim_proc_args *a, const sim_sink *sink, mcdc_error *err) {
    const char *ci = sim_arg_text(a, "@capture_instance", 0);
    sim_column cols[] = {
        {"source_schema", T("sysname"), false}, {"source_table", T("sysname"), false},
        {"capture_instance", T("sysname"), false}, {"required_column_update", T("bit"), false},
        {"ddl_command", T("nvarchar(max)"), true}, {"ddl_lsn", T("binary(10)"), false},
        {"ddl_time", T("datetime"), true},
    };
    return emit_sql(s, sink,
                    "SELECT t.source_schema, t.source_table, h.capture_instance, h.required_column_update, h.ddl_command,"
                    " h.ddl_lsn, h.ddl_time FROM \"cdc.ddl_history\" h JOIN \"cdc.change_tables\" t ON t.capture_instance ="
                    " h.capture_instance WHERE h.capture_instance = ?1 ORDER BY h.ddl_lsn",
                    ci ? ci : "", NULL, cols, (int)(sizeof cols / sizeof cols[0]), err);
}

static int spaceused(sim_session *s, const sim_proc_args *a, const sim_sink *sink, mcdc_error *err) {
    const char *obj = sim_arg_text(a, "@objname", 0);
    if (!obj) return sim_err(err, 50000, "sp_spaceused without @objname is not supported by the simulator");
    /* resolve "[dbo].[t]" */
    tsql_tok *t = NULL;
    int n = 0, i = 0;
    char parts[4][MCDC_IDENT_BYTES_MAX], tbl[SIM_NAME_MAX * 2];
    if (tsql_lex(&t, &n, obj, strlen(obj), err) != MCDC_OK) return MCDC_E_SERVER;
    int np = xl_name_parts(t, &i, n, parts);
    mcdc_free(t);
    if (np == 0) return sim_err(err, 15009, "The object '%s' does not exist in database '%s' or is invalid for this operation.", obj, s->db->name);
    xl_table_name(parts, np, tbl, sizeof tbl);
    sqlite3_stmt *st;
    bool ok = false;
    if (sqlite3_prepare_v2(s->rd, "SELECT 1 FROM __sim_tables WHERE name = ?", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, tbl, -1, SQLITE_STATIC);
        ok = sqlite3_step(st) == SQLITE_ROW;
        sqlite3_finalize(st);
    }
    if (!ok) return sim_err(err, 15009, "The object '%s' does not exist in database '%s' or is invalid for this operation.", obj, s->db->name);
    sim_column cols[] = {{"name", T("nvarchar(128)"), true}, {"rows", T("char(20)"), true},
                         {"reserved", T("varchar(18)"), true}, {"data", T("varchar(18)"), true},
                         {"index_size", T("varchar(18)"), true}, {"unused", T("varchar(18)"), true}};
    char *q = sqlite3_mprintf("SELECT %Q, substr(printf('%%-20d', count(*)), 1, 20), printf('%%d KB', count(*) / 10 + 16),"
                              " printf('%%d KB', count(*) / 10 + 8), '8 KB', '0 KB' FROM \"%w\"",
                              parts[np - 1], tbl);
    int rc = emit_sql(s, sink, q, NULL, NULL, cols, 6, err);
    sqlite3_free(q);
    return rc;
}

/* sim.fast_path_stats: the queries the fast paths served since the server
 * started (tests check a real client's reads reach them). */
static int fast_path_stats(sim_session *s, const sim_sink *sink, mcdc_error *err) {
    const sim_server *srv = s->srv;
    sim_column cols[] = {{"fast_queries", T("bigint"), false}, {"store_queries", T("bigint"), false},
                         {"table_queries", T("bigint"), false}};
    char *q = sqlite3_mprintf("SELECT %lld, %lld, %lld", (long long)srv->fast_queries, (long long)srv->store_queries,
                              (long long)srv->table_queries);
    int rc = q ? emit_sql(s, sink, q, NULL, NULL, cols, 3, err) : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    sqlite3_free(q);
    return rc;
}

/* sim.request_stats: the client requests (SQL batches and RPCs, this one
 * included) the server received since it started. */
static int request_stats(sim_session *s, const sim_sink *sink, mcdc_error *err) {
    sim_column cols[] = {{"requests", T("bigint"), false}};
    char *q = sqlite3_mprintf("SELECT %lld", (long long)atomic_load(&s->srv->requests));
    int rc = q ? emit_sql(s, sink, q, NULL, NULL, cols, 1, err) : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    sqlite3_free(q);
    return rc;
}

/* sys.sp_cdc_help_jobs: the capture and cleanup jobs of the database. */
static int help_jobs(sim_session *s, const sim_sink *sink, mcdc_error *err) {
    int rc = sim_cdc_need_db(s, err);
    if (rc != MCDC_OK) return rc;
    sim_column cols[] = {{"job_id", T("uniqueidentifier"), false}, {"job_type", T("nvarchar(20)"), false},
                         {"job_name", T("nvarchar(128)"), false}, {"maxtrans", T("int"), true},
                         {"maxscans", T("int"), true}, {"continuous", T("bit"), true},
                         {"pollinginterval", T("bigint"), true}, {"retention", T("bigint"), true},
                         {"threshold", T("bigint"), true}};
    pthread_mutex_lock(&s->srv->mu); /* maxtrans and retention are written under it */
    char *q = sim_caplog_jobs_sql(s);
    pthread_mutex_unlock(&s->srv->mu);
    rc = q ? emit_sql(s, sink, q, NULL, NULL, cols, (int)(sizeof cols / sizeof cols[0]), err)
           : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    sqlite3_free(q);
    return rc;
}

static int cleanup_proc(sim_session *s, const sim_proc_args *a, mcdc_error *err) {
    const char *ci = sim_arg_text(a, "@capture_instance", 0);
    sqlite3_value *low = sim_arg(a, "@low_water_mark", 1);
    if (!ci || !low || sqlite3_value_type(low) != SQLITE_BLOB || sqlite3_value_bytes(low) != 10)
        return sim_err(err, 22957, "LSN %s, specified as the new low endpoint for the change table associated with capture instance '%s', is not within the Change Data Capture timeline [%s, %s].",
                       "(invalid)", ci ? ci : "", "min", "max");
    sqlite3_stmt *st;
    bool ok = false, exists = false;
    if (sqlite3_prepare_v2(s->db->w, "SELECT ?1 <= (SELECT max(start_lsn) FROM \"cdc.lsn_time_mapping\"),"
                                     " EXISTS(SELECT 1 FROM \"cdc.change_tables\" WHERE capture_instance = ?2)", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_value(st, 1, low);
        sqlite3_bind_text(st, 2, ci, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW) { ok = sqlite3_column_int(st, 0) != 0; exists = sqlite3_column_int(st, 1) != 0; }
        sqlite3_finalize(st);
    }
    if (!exists) return sim_err(err, 22964, "The capture instance '%s' does not exist in the current database.", ci);
    if (!ok) return sim_err(err, 22957, "LSN specified as the new low endpoint for the change table associated with capture instance '%s' is not within the Change Data Capture timeline.", ci);
    uint8_t l[10];
    memcpy(l, sqlite3_value_blob(low), 10);
    int rc = sim_sql(s->db->w, err, "BEGIN IMMEDIATE");
    if (rc == MCDC_OK) {
        s->db->auth.trusted = true;
        cleanup_to(s->srv, s->db, ci, l);
        s->db->auth.trusted = false;
        rc = sim_sql(s->db->w, err, "COMMIT");
    }
    return rc;
}

static int64_t arg_int(const sim_proc_args *a, const char *name, int pos, int64_t dflt) {
    sqlite3_value *v = sim_arg(a, name, pos);
    if (!v || sqlite3_value_type(v) == SQLITE_NULL) return dflt;
    return sqlite3_value_int64(v);
}

int sim_cdc_proc(sim_session *s, const char *proc, const sim_proc_args *a, const sim_sink *sink, int *status,
                 mcdc_error *err, bool *handled) {
    sim_server *srv = s->srv;
    const char *p = proc;
    *status = 0;
    *handled = true;
    if (mcdc_str_nieq(p, "sys.", 4)) p += 4;
    bool sim_proc = mcdc_str_nieq(p, "sim.", 4);
    bool admin_only = sim_proc || mcdc_str_ieq(p, "sp_cdc_enable_db") || mcdc_str_ieq(p, "sp_cdc_disable_db") ||
                      mcdc_str_ieq(p, "sp_cdc_enable_table") || mcdc_str_ieq(p, "sp_cdc_disable_table") ||
                      mcdc_str_ieq(p, "sp_cdc_cleanup_change_table") || mcdc_str_ieq(p, "sp_cdc_change_job") ||
                      mcdc_str_ieq(p, "sp_cdc_start_job") || mcdc_str_ieq(p, "sp_cdc_stop_job") ||
                      mcdc_str_ieq(p, "sp_cdc_help_jobs");
    if (admin_only && !s->admin)
        return sim_err(err, 229, "The EXECUTE permission was denied on the object '%s', database '%s', schema '%s'.",
                       sim_proc ? p + 4 : p, s->db->name, sim_proc ? "sim" : "sys");
    int rc = MCDC_OK;
    /* read-only procedures: no mutex */
    if (mcdc_str_ieq(p, "sp_cdc_help_change_data_capture")) return help_cdc(s, a, sink, err);
    if (mcdc_str_ieq(p, "sp_cdc_get_captured_columns")) return captured_columns(s, a, sink, err);
    if (mcdc_str_ieq(p, "sp_cdc_get_ddl_history")) return ddl_history(s, a, sink, err);
    if (mcdc_str_ieq(p, "sp_spaceused")) return spaceused(s, a, sink, err);
    if (mcdc_str_ieq(p, "sim.fast_path_stats")) return fast_path_stats(s, sink, err);
    if (mcdc_str_ieq(p, "sim.request_stats")) return request_stats(s, sink, err);
    if (mcdc_str_ieq(p, "sp_cdc_help_jobs")) return help_jobs(s, sink, err);
    if (mcdc_str_ieq(p, "sim.create_tables")) return sim_work_create_tables(s, a, err);
    if (mcdc_str_ieq(p, "sim.workload")) return sim_work_start(s, a, err);
    if (mcdc_str_ieq(p, "sim.stop_workload")) { sim_work_stop_all(srv); return MCDC_OK; }
    if (mcdc_str_ieq(p, "sim.bulk_load") || mcdc_str_ieq(p, "sim.bulk_load_table")) {
        int64_t rows = 0;
        rc = mcdc_str_ieq(p, "sim.bulk_load") ? sim_work_bulk_load(s, a, &rows, err) : sim_work_bulk_load_table(s, a, &rows, err);
        if (rc == MCDC_OK && sink->done && sink->done(sink->ctx, rows, true, true, false)) return MCDC_E_CANCELLED;
        return rc;
    }
    if (mcdc_str_ieq(p, "sim.fault"))
        return sim_fault_add(srv, s->serial, sim_arg_text(a, "@kind", 0) ? sim_arg_text(a, "@kind", 0) : "",
                             (int)arg_int(a, "@count", 1, 0), (int)arg_int(a, "@ms", 2, 0), (int)arg_int(a, "@times", 3, 1), err);
    if (mcdc_str_ieq(p, "sim.clear_faults")) { sim_fault_clear(srv); return MCDC_OK; }
    pthread_mutex_lock(&srv->mu);
    if (mcdc_str_ieq(p, "sp_cdc_enable_db")) {
        if (mcdc_str_ieq(s->db->name, "master")) rc = sim_err(err, 22988, "This instance of SQL Server is the Developer Edition (64-bit). Change data capture is not supported on the system database master.");
        else if (!s->db->cdc_enabled) {
            s->db->cdc_enabled = true;
            rc = sim_db_state_put(s->db, "cdc_enabled", 1);
            if (rc == MCDC_OK) rc = sim_db_state_put(s->db, "cdc_enabled_local_us", sim_srv_local_us(srv, sim_srv_utc_us(srv)));
        }
    } else if (mcdc_str_ieq(p, "sp_cdc_disable_db")) {
        if (s->db->cdc_enabled) {
            sqlite3_stmt *st;
            char names[64][SIM_NAME_MAX];
            int n = 0;
            if (sqlite3_prepare_v2(s->db->w, "SELECT capture_instance FROM \"cdc.change_tables\"", -1, &st, NULL) == SQLITE_OK) {
                while (sqlite3_step(st) == SQLITE_ROW && n < 64) snprintf(names[n++], SIM_NAME_MAX, "%s", (const char *)sqlite3_column_text(st, 0));
                sqlite3_finalize(st);
            }
            for (int k = 0; k < n && rc == MCDC_OK; k++) rc = drop_instance(s->db, names[k], err);
            if (rc == MCDC_OK) rc = sim_sql(s->db->w, err, "DELETE FROM \"cdc.lsn_time_mapping\"; DELETE FROM __sim_pending_tx;");
            s->db->cdc_enabled = false;
            sim_db_state_put(s->db, "cdc_enabled", 0);
        }
    } else if (mcdc_str_ieq(p, "sp_cdc_enable_table") || mcdc_str_ieq(p, "sp_cdc_disable_table")) {
        rc = sim_sql(s->db->w, err, "BEGIN IMMEDIATE");
        if (rc == MCDC_OK) {
            rc = mcdc_str_ieq(p, "sp_cdc_enable_table") ? enable_table(s, a, err) : disable_table(s, a, err);
            sim_sql(s->db->w, NULL, rc == MCDC_OK ? "COMMIT" : "ROLLBACK");
        }
    } else if (mcdc_str_ieq(p, "sp_cdc_cleanup_change_table")) {
        rc = cleanup_proc(s, a, err);
    } else if (mcdc_str_ieq(p, "sp_cdc_change_job")) {
        int64_t ret = arg_int(a, "@retention", -1, -1), mt = arg_int(a, "@maxtrans", -1, -1);
        if (ret >= 0) { s->db->retention_min = ret; sim_db_state_put(s->db, "retention_min", ret); }
        if (mt > 0) srv->capture_maxtrans = (int)mt;
    } else if (mcdc_str_ieq(p, "sp_cdc_start_job") || mcdc_str_ieq(p, "sp_cdc_stop_job")) {
        rc = sim_caplog_job(s, a, mcdc_str_ieq(p, "sp_cdc_start_job"), err);
    } else if (mcdc_str_ieq(p, "sim.advance_clock")) {
        sqlite3_value *v = sim_arg(a, "@seconds", 0);
        double sec = v ? sqlite3_value_double(v) : 0;
        int64_t frozen = atomic_load(&srv->clock_frozen_us);
        if (frozen != INT64_MIN) {
            atomic_store(&srv->clock_frozen_us, frozen + (int64_t)(sec * 1e6));
            sim_server_state_put(srv, "clock_frozen_us", NULL, atomic_load(&srv->clock_frozen_us));
        } else {
            srv->clock_off_us += (int64_t)(sec * 1e6);
            sim_server_state_put(srv, "clock_off_us", NULL, srv->clock_off_us);
        }
        if (sec < 0) sim_srv_clock_reset(srv);
        if (srv->cap_started) pthread_cond_broadcast(&srv->cap_cv);
    } else if (mcdc_str_ieq(p, "sim.set_clock")) {
        const char *u = sim_arg_text(a, "@utc", 0);
        int64_t us;
        if (!u || mcdc_parse_ts_us(u, strlen(u), &us, NULL) != MCDC_OK)
            rc = sim_err(err, 50000, "sim.set_clock: @utc must be 'YYYY-MM-DD HH:MM:SS[.fff]' (got '%s')", u ? u : "NULL");
        else {
            /* @frozen = 1: the clock stands at @utc (see sim_engine.c) */
            bool frozen = arg_int(a, "@frozen", 1, 0) != 0;
            srv->clock_off_us = us - mcdc_now_utc_us();
            atomic_store(&srv->clock_frozen_us, frozen ? us : INT64_MIN);
            sim_srv_clock_reset(srv);
            sim_server_state_put(srv, "clock_off_us", NULL, srv->clock_off_us);
            sim_server_state_put(srv, "clock_frozen_us", NULL, frozen ? us : INT64_MIN);
        }
    } else if (mcdc_str_ieq(p, "sim.set_time_zone")) {
        const char *z = sim_arg_text(a, "@zone", 0);
        const sim_tz *tz = z ? sim_tz_get(z, err) : NULL;
        if (!tz) rc = sim_err(err, 50000, "sim.set_time_zone: unknown Windows zone name '%s'", z ? z : "NULL");
        else {
            srv->tz = tz;
            sim_server_state_put(srv, "zone", sim_tz_name(tz), 0);
        }
    } else if (mcdc_str_ieq(p, "sim.set_fast_path")) {
        /* @on = 0 serves the reader's change query through the general path
         * (tests compare the two) */
        srv->fast_off = arg_int(a, "@on", 0, 1) == 0;
    } else if (mcdc_str_ieq(p, "sim.run_capture")) {
        sim_cdc_scan(srv, arg_int(a, "@ignore_latency", 0, 0) != 0);
    } else if (mcdc_str_ieq(p, "sim.set_capture_latency")) {
        srv->capture_latency_ms = (int)arg_int(a, "@ms", 0, 0);
        sim_server_state_put(srv, "capture_latency_ms", NULL, srv->capture_latency_ms);
    } else if (mcdc_str_ieq(p, "sim.set_capture_maxtrans")) {
        srv->capture_maxtrans = (int)arg_int(a, "@n", 0, 500);
        sim_server_state_put(srv, "capture_maxtrans", NULL, srv->capture_maxtrans);
    } else {
        *handled = false;
    }
    pthread_mutex_unlock(&srv->mu);
    return rc;
}
