/*
 * sim_capture_log.c - what the capture job tells about itself, as SQL
 * Server does: sys.dm_cdc_log_scan_sessions (one row per scan session, the
 * aggregate row 0, consecutive empty scans folded into one row, the last
 * SIM_SCAN_SESSIONS_KEPT sessions kept), sys.dm_cdc_errors (the errors of
 * those sessions), both reset when the server starts, both needing VIEW
 * DATABASE STATE; and the jobs (sys.sp_cdc_stop_job, sys.sp_cdc_start_job,
 * sys.sp_cdc_help_jobs).
 *
 * The views are tables of the database file, written by the capture scan in
 * its own SQLite transaction (under the server mutex), read like any table.
 * Times are the server's clock in its time zone (datetime), LSNs SQL
 * Server's text form "0000002a:00000100:0001".
 */
#include "sim_engine_int.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define SIM_SCAN_SESSIONS_KEPT 32 /* as dm_cdc_errors' "previous 32 sessions" */

static const char *CAPLOG_SCHEMA =
    "CREATE TABLE IF NOT EXISTS \"sys.dm_cdc_log_scan_sessions\"(session_id INTEGER PRIMARY KEY, start_time TEXT,"
    " end_time TEXT, duration INT, scan_phase TEXT, error_count INT, start_lsn TEXT, current_lsn TEXT, end_lsn TEXT,"
    " tran_count INT, last_commit_lsn TEXT, last_commit_time TEXT, log_record_count INT, schema_change_count INT,"
    " command_count INT, first_begin_cdc_lsn TEXT, last_commit_cdc_lsn TEXT, last_commit_cdc_time TEXT, latency INT,"
    " empty_scan_count INT, failed_sessions_count INT);"
    "CREATE TABLE IF NOT EXISTS \"sys.dm_cdc_errors\"(session_id INT, phase_number INT, entry_time TEXT,"
    " error_number INT, error_severity INT, error_state INT, error_message TEXT, start_lsn TEXT, begin_lsn TEXT,"
    " sequence_value TEXT);"
    /* reset when the instance starts (the views' documentation) */
    "DELETE FROM \"sys.dm_cdc_log_scan_sessions\"; DELETE FROM \"sys.dm_cdc_errors\";"
    "INSERT OR IGNORE INTO __sim_columns VALUES"
    " ('sys.dm_cdc_log_scan_sessions', 1, 'session_id', 'int', 0, 0),"
    " ('sys.dm_cdc_log_scan_sessions', 2, 'start_time', 'datetime', 1, 0),"
    " ('sys.dm_cdc_log_scan_sessions', 3, 'end_time', 'datetime', 1, 0),"
    " ('sys.dm_cdc_log_scan_sessions', 4, 'duration', 'int', 1, 0),"
    " ('sys.dm_cdc_log_scan_sessions', 5, 'scan_phase', 'nvarchar(200)', 1, 0),"
    " ('sys.dm_cdc_log_scan_sessions', 6, 'error_count', 'int', 1, 0),"
    " ('sys.dm_cdc_log_scan_sessions', 7, 'start_lsn', 'nvarchar(23)', 1, 0),"
    " ('sys.dm_cdc_log_scan_sessions', 8, 'current_lsn', 'nvarchar(23)', 1, 0),"
    " ('sys.dm_cdc_log_scan_sessions', 9, 'end_lsn', 'nvarchar(23)', 1, 0),"
    " ('sys.dm_cdc_log_scan_sessions', 10, 'tran_count', 'bigint', 1, 0),"
    " ('sys.dm_cdc_log_scan_sessions', 11, 'last_commit_lsn', 'nvarchar(23)', 1, 0),"
    " ('sys.dm_cdc_log_scan_sessions', 12, 'last_commit_time', 'datetime', 1, 0),"
    " ('sys.dm_cdc_log_scan_sessions', 13, 'log_record_count', 'bigint', 1, 0),"
    " ('sys.dm_cdc_log_scan_sessions', 14, 'schema_change_count', 'int', 1, 0),"
    " ('sys.dm_cdc_log_scan_sessions', 15, 'command_count', 'bigint', 1, 0),"
    " ('sys.dm_cdc_log_scan_sessions', 16, 'first_begin_cdc_lsn', 'nvarchar(23)', 1, 0),"
    " ('sys.dm_cdc_log_scan_sessions', 17, 'last_commit_cdc_lsn', 'nvarchar(23)', 1, 0),"
    " ('sys.dm_cdc_log_scan_sessions', 18, 'last_commit_cdc_time', 'datetime', 1, 0),"
    " ('sys.dm_cdc_log_scan_sessions', 19, 'latency', 'int', 1, 0),"
    " ('sys.dm_cdc_log_scan_sessions', 20, 'empty_scan_count', 'int', 1, 0),"
    " ('sys.dm_cdc_log_scan_sessions', 21, 'failed_sessions_count', 'int', 1, 0),"
    " ('sys.dm_cdc_errors', 1, 'session_id', 'int', 1, 0),"
    " ('sys.dm_cdc_errors', 2, 'phase_number', 'int', 1, 0),"
    " ('sys.dm_cdc_errors', 3, 'entry_time', 'datetime', 1, 0),"
    " ('sys.dm_cdc_errors', 4, 'error_number', 'int', 1, 0),"
    " ('sys.dm_cdc_errors', 5, 'error_severity', 'int', 1, 0),"
    " ('sys.dm_cdc_errors', 6, 'error_state', 'int', 1, 0),"
    " ('sys.dm_cdc_errors', 7, 'error_message', 'nvarchar(1024)', 1, 0),"
    " ('sys.dm_cdc_errors', 8, 'start_lsn', 'nvarchar(23)', 1, 0),"
    " ('sys.dm_cdc_errors', 9, 'begin_lsn', 'nvarchar(23)', 1, 0),"
    " ('sys.dm_cdc_errors', 10, 'sequence_value', 'nvarchar(23)', 1, 0);";

int sim_caplog_init_db(sim_db *d, mcdc_error *err) { return sim_sql(d->w, err, "%s", CAPLOG_SCHEMA); }

bool sim_caplog_view(const char *name) {
    return mcdc_str_ieq(name, "sys.dm_cdc_log_scan_sessions") || mcdc_str_ieq(name, "sys.dm_cdc_errors") ||
           mcdc_str_ieq(name, "sys.dm_db_partition_stats"); /* sim_catalog.c's, needing the same */
}

/* SQL Server's text of an LSN: VLF, block, slot in hex. */
static void lsn_text(uint64_t v, char out[24]) {
    snprintf(out, 24, "%08x:%08x:%04x", (unsigned)(v >> 48), (unsigned)((v >> 16) & 0xFFFFFFFFu), (unsigned)(v & 0xFFFF));
}

static void local_text(sim_server *srv, int64_t utc_us, char out[48]) {
    sim_type t = {SIM_T_DATETIME, 0, 3, 0};
    sim_format_datetime(sim_srv_local_us(srv, utc_us), &t, out);
}

/* Binds an LSN text, or NULL for 0 (none). */
static void bind_lsn(sqlite3_stmt *st, int i, uint64_t v) {
    char t[24];
    if (v == 0) {
        sqlite3_bind_null(st, i);
        return;
    }
    lsn_text(v, t);
    sqlite3_bind_text(st, i, t, -1, SQLITE_TRANSIENT);
}

static void bind_time(sqlite3_stmt *st, int i, sim_server *srv, int64_t utc_us) {
    char t[48];
    if (utc_us == INT64_MIN) {
        sqlite3_bind_null(st, i);
        return;
    }
    local_text(srv, utc_us, t);
    sqlite3_bind_text(st, i, t, -1, SQLITE_TRANSIENT);
}

static int64_t last_session(sqlite3 *w, bool *empty) {
    sqlite3_stmt *st;
    int64_t id = 0;
    *empty = false;
    if (sqlite3_prepare_v2(w, "SELECT session_id, tran_count = 0 AND error_count = 0 AND empty_scan_count > 0 FROM"
                              " \"sys.dm_cdc_log_scan_sessions\" WHERE session_id > 0 ORDER BY session_id DESC LIMIT 1",
                           -1, &st, NULL) != SQLITE_OK)
        return 0;
    if (sqlite3_step(st) == SQLITE_ROW) {
        id = sqlite3_column_int64(st, 0);
        *empty = sqlite3_column_int(st, 1) != 0;
    }
    sqlite3_finalize(st);
    return id;
}

/* Row 0, when the first session of the server's life starts: the time
 * aggregation began; every later session adds its numbers to it. */
static void aggregate_start(sim_server *srv, sqlite3 *w, int64_t start_utc_us) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(w, "INSERT OR IGNORE INTO \"sys.dm_cdc_log_scan_sessions\"(session_id, start_time, duration,"
                              " scan_phase, error_count, current_lsn, tran_count, log_record_count, schema_change_count,"
                              " command_count, latency, empty_scan_count, failed_sessions_count) VALUES (0, ?1, 0,"
                              " 'Aggregate', 0, '00000000:00000000:0000', 0, 0, 0, 0, 0, 0, 0)",
                           -1, &st, NULL) != SQLITE_OK)
        return;
    bind_time(st, 1, srv, start_utc_us);
    sqlite3_step(st);
    sqlite3_finalize(st);
}

/* Adds a finished session's numbers to row 0. */
static void aggregate_add(sqlite3 *w, int64_t id, bool new_row, int latency) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(
            w,
            "UPDATE \"sys.dm_cdc_log_scan_sessions\" AS a SET end_time = s.end_time, start_lsn = s.start_lsn,"
            " end_lsn = s.end_lsn, duration = a.duration + CASE WHEN ?2 THEN s.duration ELSE 0 END,"
            " error_count = a.error_count + CASE WHEN ?2 THEN s.error_count ELSE 0 END,"
            " tran_count = a.tran_count + CASE WHEN ?2 THEN s.tran_count ELSE 0 END,"
            " log_record_count = a.log_record_count + CASE WHEN ?2 THEN s.log_record_count ELSE 0 END,"
            " schema_change_count = a.schema_change_count + CASE WHEN ?2 THEN s.schema_change_count ELSE 0 END,"
            " command_count = a.command_count + CASE WHEN ?2 THEN s.command_count ELSE 0 END,"
            " last_commit_lsn = coalesce(s.last_commit_lsn, a.last_commit_lsn),"
            " last_commit_time = coalesce(s.last_commit_time, a.last_commit_time),"
            " first_begin_cdc_lsn = coalesce(a.first_begin_cdc_lsn, s.first_begin_cdc_lsn),"
            " last_commit_cdc_lsn = coalesce(s.last_commit_cdc_lsn, a.last_commit_cdc_lsn),"
            " last_commit_cdc_time = coalesce(s.last_commit_cdc_time, a.last_commit_cdc_time),"
            " latency = CASE WHEN ?3 <> 0 THEN ?3 ELSE a.latency END,"
            " empty_scan_count = a.empty_scan_count + CASE WHEN s.tran_count = 0 AND s.error_count = 0 THEN 1 ELSE 0 END,"
            " failed_sessions_count = a.failed_sessions_count + CASE WHEN ?2 THEN s.failed_sessions_count ELSE 0 END"
            " FROM \"sys.dm_cdc_log_scan_sessions\" AS s WHERE a.session_id = 0 AND s.session_id = ?1",
            -1, &st, NULL) != SQLITE_OK) {
        mcdc_log(MCDC_LOG_WARN, "sim: capture log: %s", sqlite3_errmsg(w));
        return;
    }
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int(st, 2, new_row);
    sqlite3_bind_int(st, 3, latency);
    sqlite3_step(st);
    sqlite3_finalize(st);
}

/* The failed session's row of sys.dm_cdc_errors (phase 2; the LSNs the
 * first queued commit's, or zeros). */
static void record_error(sim_server *srv, sqlite3 *w, int64_t id, const sim_scan_stats *x, int64_t now) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(w, "INSERT INTO \"sys.dm_cdc_errors\" VALUES (?1, 2, ?2, ?3, 16, 1, ?4, ?5, ?6, ?7)", -1, &st,
                           NULL) != SQLITE_OK)
        return;
    sqlite3_bind_int64(st, 1, id);
    bind_time(st, 2, srv, now);
    sqlite3_bind_int(st, 3, x->error_number);
    sqlite3_bind_text(st, 4, x->error_message, -1, SQLITE_STATIC);
    char z[24];
    lsn_text(0, z);
    for (int k = 5; k <= 7; k++) {
        if (x->failed_lsn) bind_lsn(st, k, x->failed_lsn);
        else sqlite3_bind_text(st, k, z, -1, SQLITE_TRANSIENT);
    }
    sqlite3_step(st);
    sqlite3_finalize(st);
}

/* Another empty scan after an empty one: the last row counts it. */
static void fold_empty(sim_server *srv, sim_db *d, int64_t id, int64_t now) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(d->w, "UPDATE \"sys.dm_cdc_log_scan_sessions\" SET end_time = ?2, current_lsn = ?3, end_lsn = ?3,"
                                 " empty_scan_count = empty_scan_count + 1 WHERE session_id = ?1",
                           -1, &st, NULL) != SQLITE_OK)
        return;
    sqlite3_bind_int64(st, 1, id);
    bind_time(st, 2, srv, now);
    bind_lsn(st, 3, d->lsn);
    sqlite3_step(st);
    sqlite3_finalize(st);
    aggregate_add(d->w, id, false, 0);
}

void sim_caplog_session(sim_server *srv, sim_db *d, const sim_scan_stats *x) {
    sqlite3 *w = d->w;
    int64_t now = sim_srv_utc_us(srv);
    bool last_empty = false;
    int64_t last = last_session(w, &last_empty);
    bool empty = x->tran_count == 0 && !x->failed;
    aggregate_start(srv, w, x->start_utc_us);
    if (empty && last_empty) {
        fold_empty(srv, d, last, now);
        return;
    }
    int64_t id = last + 1;
    int latency = 0;
    if (x->tran_count > 0 && x->last_commit_utc_us != INT64_MIN)
        latency = (int)((now - x->last_commit_utc_us) / 1000000);
    if (latency < 0) latency = 0;
    int64_t duration = x->tran_count > 0 ? (now - x->start_utc_us) / 1000000 : 0;
    uint64_t start_lsn = x->tran_count > 0 ? x->first_begin_lsn : d->lsn;
    uint64_t end_lsn = x->tran_count > 0 ? x->last_commit_lsn : d->lsn;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(w, "INSERT INTO \"sys.dm_cdc_log_scan_sessions\" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10,"
                              " ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)",
                           -1, &st, NULL) != SQLITE_OK)
        return;
    sqlite3_bind_int64(st, 1, id);
    bind_time(st, 2, srv, x->start_utc_us);
    bind_time(st, 3, srv, now);
    sqlite3_bind_int64(st, 4, duration);
    sqlite3_bind_text(st, 5, x->failed ? "First scan, building hash table" : "Done", -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 6, x->failed ? 1 : 0);
    bind_lsn(st, 7, start_lsn);
    bind_lsn(st, 8, end_lsn);
    bind_lsn(st, 9, end_lsn);
    sqlite3_bind_int64(st, 10, x->tran_count);
    bind_lsn(st, 11, x->tran_count > 0 ? x->last_commit_lsn : 0);
    bind_time(st, 12, srv, x->tran_count > 0 ? x->last_commit_utc_us : INT64_MIN);
    /* a begin and a commit record per transaction, one per change row */
    sqlite3_bind_int64(st, 13, 2 * (int64_t)x->tran_count + x->commands);
    sqlite3_bind_int(st, 14, x->schema_changes);
    sqlite3_bind_int64(st, 15, x->commands);
    bind_lsn(st, 16, x->tran_count > 0 ? x->first_begin_lsn : 0);
    bind_lsn(st, 17, x->tran_count > 0 ? x->last_commit_lsn : 0);
    bind_time(st, 18, srv, x->tran_count > 0 ? x->last_commit_utc_us : INT64_MIN);
    sqlite3_bind_int(st, 19, latency);
    sqlite3_bind_int(st, 20, empty ? 1 : 0);
    sqlite3_bind_int(st, 21, x->failed ? 1 : 0);
    if (sqlite3_step(st) != SQLITE_DONE) mcdc_log(MCDC_LOG_WARN, "sim: capture log: %s", sqlite3_errmsg(w));
    sqlite3_finalize(st);
    if (x->failed) record_error(srv, w, id, x, now);
    aggregate_add(w, id, true, latency);
    sim_sql(w, NULL, "DELETE FROM \"sys.dm_cdc_log_scan_sessions\" WHERE session_id > 0 AND session_id <= %lld;"
                     "DELETE FROM \"sys.dm_cdc_errors\" WHERE session_id > 0 AND session_id <= %lld",
            (long long)(id - SIM_SCAN_SESSIONS_KEPT), (long long)(id - SIM_SCAN_SESSIONS_KEPT));
}

/* ---- VIEW DATABASE STATE ---------------------------------------------------- */
int sim_caplog_check_perm(sim_session *s, mcdc_error *err) {
    if (s->admin) return MCDC_OK;
    char user[SIM_NAME_MAX];
    sim_db_user_name(s, user, sizeof user);
    if (sim_has_scope_grant(s->rd, s->login, "VIEW DATABASE STATE") ||
        sim_has_scope_grant(s->rd, user, "VIEW DATABASE STATE"))
        return MCDC_OK;
    bool server = false;
    pthread_mutex_lock(&s->srv->mu);
    sim_db *m = sim_find_db(s->srv, "master");
    if (m) server = sim_has_scope_grant(m->w, s->login, "VIEW SERVER STATE");
    pthread_mutex_unlock(&s->srv->mu);
    if (server) return MCDC_OK;
    int rc = sim_err(err, 262, "VIEW DATABASE STATE permission denied in database '%s'.", s->db->name);
    if (err) err->server_class = 14;
    return rc;
}

/* ---- the jobs ----------------------------------------------------------------- */
static int job_type(const sim_proc_args *a, bool *capture, mcdc_error *err) {
    const char *t = sim_arg_text(a, "@job_type", 0);
    if (!t || mcdc_str_ieq(t, "capture")) *capture = true;
    else if (mcdc_str_ieq(t, "cleanup")) *capture = false;
    else return sim_err(err, 22992, "The specified @job_type, %s, is not a valid value. Specify 'capture' or 'cleanup'.", t);
    return MCDC_OK;
}

int sim_caplog_job(sim_session *s, const sim_proc_args *a, bool start, mcdc_error *err) {
    bool capture = true;
    int rc = job_type(a, &capture, err);
    if (rc != MCDC_OK) return rc;
    sim_db *d = s->db;
    rc = sim_cdc_need_db(s, err);
    if (rc != MCDC_OK) return rc;
    bool *stopped = capture ? &d->capture_stopped : &d->cleanup_stopped;
    const char *kind = capture ? "capture" : "cleanup";
    if (start && !*stopped)
        return sim_err(err, 22022, "SQLServerAgent Error: Request to run job cdc.%s_%s (from User %s) refused because the job"
                                   " is already running from a request by User %s.", d->name, kind, s->login, s->login);
    if (!start && *stopped)
        return sim_err(err, 22022, "SQLServerAgent Error: Request to stop job cdc.%s_%s (from User %s) refused because the job"
                                   " is not currently running.", d->name, kind, s->login);
    *stopped = !start;
    if (start && capture) sim_cdc_wake(s->srv);
    return MCDC_OK;
}

char *sim_caplog_jobs_sql(sim_session *s) {
    sim_db *d = s->db;
    /* a job_id that stays the same for the database (FNV-1a of its name) */
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const char *p = d->name; *p; p++) h = (h ^ (uint8_t)(*p | 0x20)) * 0x100000001b3ULL;
    return sqlite3_mprintf(
        "SELECT '%08X-%04X-4%03X-8%03X-%012llX' AS job_id, 'capture' AS job_type, 'cdc.%q_capture' AS job_name,"
        " %d AS maxtrans, 10 AS maxscans, 1 AS continuous, 5 AS pollinginterval, 0 AS retention, 0 AS threshold"
        " UNION ALL SELECT '%08X-%04X-4%03X-9%03X-%012llX', 'cleanup', 'cdc.%q_cleanup', 0, 0, 0, 0, %lld, 5000",
        (unsigned)(h >> 32), (unsigned)(h >> 16) & 0xFFFF, (unsigned)h & 0xFFF, (unsigned)(h >> 4) & 0xFFF,
        (unsigned long long)(h & 0xFFFFFFFFFFFFULL), d->name, s->srv->capture_maxtrans, (unsigned)(h >> 32),
        (unsigned)(h >> 16) & 0xFFFF, (unsigned)h & 0xFFF, (unsigned)(h >> 8) & 0xFFF,
        (unsigned long long)((h >> 8) & 0xFFFFFFFFFFFFULL), d->name, (long long)d->retention_min);
}
