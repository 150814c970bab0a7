/* mcdc_cdc_client.c - the reference's CDC queries over the driver seam. */
#include "mcdc_cdc_client.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_changes.h"  /* mcdc_probe_item */
#include "mcdc_options.h" /* mcdc_validate_capture_instance */

struct mcdc_cdc_client {
    mcdc_conn *conn; /* borrowed */
    mcdc_clock clock;
};

/* ---- clock ------------------------------------------------------------------ */
void mcdc_clock_describe(char out[MCDC_ZONE_NAME_MAX + 16], const mcdc_clock *c) {
    switch (c->kind) {
    case MCDC_CLOCK_UTC: snprintf(out, MCDC_ZONE_NAME_MAX + 16, "UTC"); return;
    case MCDC_CLOCK_ZONE: snprintf(out, MCDC_ZONE_NAME_MAX + 16, "%s", c->zone); return;
    case MCDC_CLOCK_FIXED: {
        int o = c->offset_minutes, a = o < 0 ? -o : o;
        snprintf(out, MCDC_ZONE_NAME_MAX + 16, "UTC%c%02d:%02d", o < 0 ? '-' : '+', a / 60,
                 a % 60);
        return;
    }
    }
}

int mcdc_clock_from_name(mcdc_clock *out, const char *name, mcdc_error *err) {
    memset(out, 0, sizeof *out);
    if (name == NULL || *name == 0)
        return mcdc_error_set(err, MCDC_E_INVALID, "sourceTimeZone: empty zone name");
    if (mcdc_str_ieq(name, "UTC")) {
        out->kind = MCDC_CLOCK_UTC;
        return MCDC_OK;
    }
    size_t n = strlen(name);
    if (n >= MCDC_ZONE_NAME_MAX)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "sourceTimeZone: a zone name of %zu characters is too long", n);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)name[i];
        if (!(isalnum(ch) || strchr(" .-+()_/:", ch) || ch >= 0x80))
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "sourceTimeZone: '%s' is not a Windows time zone name (it "
                                  "has the character '%c')",
                                  name, ch);
    }
    out->kind = MCDC_CLOCK_ZONE;
    memcpy(out->zone, name, n + 1);
    return MCDC_OK;
}

/* Appends s as an N'' literal. */
static int lit(mcdc_buf *b, const char *s, mcdc_error *err) {
    int rc = mcdc_buf_append(b, "N'", 2, err);
    for (; rc == MCDC_OK && *s; s++) {
        if (*s == '\'') rc = mcdc_buf_append_byte(b, '\'', err);
        if (rc == MCDC_OK) rc = mcdc_buf_append_byte(b, (uint8_t)*s, err);
    }
    return rc == MCDC_OK ? mcdc_buf_append_byte(b, '\'', err) : rc;
}

int mcdc_clock_sql_utc(mcdc_buf *out, const mcdc_clock *c, const char *t, bool offset_known,
                       int offset_minutes, mcdc_error *err) {
    if (c->kind == MCDC_CLOCK_UTC || (offset_known && offset_minutes == 0) ||
        (c->kind == MCDC_CLOCK_FIXED && c->offset_minutes == 0 && !offset_known))
        return mcdc_buf_printf(out, err, "CAST(%s AS datetime2(3))", t);
    if (offset_known || c->kind == MCDC_CLOCK_FIXED) {
        int o = offset_known ? offset_minutes : c->offset_minutes;
        return mcdc_buf_printf(out, err, "CAST(DATEADD(minute, %d, %s) AS datetime2(3))", -o, t);
    }
    /* The reference's (t AT TIME ZONE z) AT TIME ZONE 'UTC', written as the
     * left-associative chain SQL Server documents (same meaning). */
    int rc = mcdc_buf_printf(out, err, "CAST(%s AT TIME ZONE ", t);
    if (rc == MCDC_OK) rc = lit(out, c->zone, err);
    if (rc == MCDC_OK) rc = mcdc_buf_append_str(out, " AT TIME ZONE 'UTC' AS datetime2(3))", err);
    return rc;
}

/* Appends DATEPART(TZOFFSET, <t shifted by hours> AT TIME ZONE z): the zone's
 * offset at local time t (in a repeated hour, the one before the change). */
static int zone_offset_sql(mcdc_buf *out, const mcdc_clock *k, const char *t, int hours,
                           mcdc_error *err) {
    int rc = hours ? mcdc_buf_printf(out, err, "DATEPART(TZOFFSET, DATEADD(hour, %d, %s) AT TIME "
                                               "ZONE ", hours, t)
                   : mcdc_buf_printf(out, err, "DATEPART(TZOFFSET, %s AT TIME ZONE ", t);
    if (rc == MCDC_OK) rc = lit(out, k->zone, err);
    return rc == MCDC_OK ? mcdc_buf_append_byte(out, ')', err) : rc;
}

/* Appends "t falls back within 3 hours": the offset 3 hours on is smaller. */
static int falls_back_sql(mcdc_buf *out, const mcdc_clock *k, const char *t, mcdc_error *err) {
    int rc = zone_offset_sql(out, k, t, 3, err);
    if (rc == MCDC_OK) rc = mcdc_buf_append_str(out, " < ", err);
    return rc == MCDC_OK ? zone_offset_sql(out, k, t, 0, err) : rc;
}

/*
 * The one conversion of a server time to UTC: the commit at LSN expression
 * `lsn` that reads the local datetime expression `t`. A fall-back repeats an
 * hour of a named zone's clock, which AT TIME ZONE reads the first time
 * (the offset before the change); a commit that follows a drop (an entry
 * reading more than a minute before the entry before it, where the clock
 * falls back within 3 hours) no more than 3 hours earlier reads it the
 * second time, with the offset 3 hours on. So UTC times follow LSN order
 * across the change. The drops are the range's, found once by
 * mcdc_cdc_clock_drops (bronze's reads), or, drops NULL, looked up for the
 * one commit by a subquery (every single commit time: offsets, facts,
 * the verdict, the retention metrics). A UTC or fixed clock needs neither.
 */
static int clock_utc_by_lsn(mcdc_buf *out, const mcdc_clock *k, const char *t, const char *lsn,
                            const mcdc_clock_drop *drops, int nd, mcdc_error *err) {
    if (k->kind != MCDC_CLOCK_ZONE) return mcdc_clock_sql_utc(out, k, t, false, 0, err);
    /* The outer CAST types the CASE as datetime2(3) for any server. */
    int rc = mcdc_buf_append_str(out, "CAST(CASE WHEN (", err);
    for (int i = 0; i < nd && rc == MCDC_OK; i++) {
        char hex[MCDC_LSN_TEXT_LEN + 1];
        mcdc_lsn_format(&drops[i].lsn, hex);
        rc = mcdc_buf_printf(out, err,
                             "%s(%s >= CONVERT(binary(10), N'%s', 1) AND CONVERT(datetime, "
                             "N'%s', 126) BETWEEN DATEADD(hour, -3, %s) AND %s)",
                             i ? " OR " : "", lsn, hex, drops[i].local_time, t, t);
    }
    if (drops == NULL) {
        /* The entries from the last one read 3 hours before t (only when t
         * is near a fall-back: otherwise from lsn itself, none) up to lsn,
         * each with the one before it: a seek on the key each. */
        if (rc == MCDC_OK) rc = mcdc_buf_append_str(out, "EXISTS (SELECT 1 FROM (SELECT CASE WHEN ", err);
        if (rc == MCDC_OK) rc = falls_back_sql(out, k, t, err);
        if (rc == MCDC_OK)
            rc = mcdc_buf_printf(out, err,
                                 " THEN ISNULL((SELECT TOP (1) b.start_lsn FROM "
                                 "cdc.lsn_time_mapping AS b WHERE b.tran_end_time <= "
                                 "DATEADD(hour, -3, %s) ORDER BY b.tran_end_time DESC), "
                                 "0x00000000000000000000) ELSE %s END AS lo) AS w CROSS APPLY "
                                 "(SELECT x.start_lsn, x.tran_end_time AS dt, "
                                 "LAG(x.tran_end_time) OVER (ORDER BY x.start_lsn) AS prev FROM "
                                 "cdc.lsn_time_mapping AS x WHERE x.start_lsn > w.lo AND "
                                 "x.start_lsn <= %s) AS d WHERE d.dt < DATEADD(minute, -1, d.prev) "
                                 "AND d.dt BETWEEN DATEADD(hour, -3, %s) AND %s AND ",
                                 t, lsn, lsn, t, t);
        if (rc == MCDC_OK) rc = falls_back_sql(out, k, "d.dt", err);
        if (rc == MCDC_OK) rc = mcdc_buf_append_byte(out, ')', err);
    }
    if (rc == MCDC_OK) rc = mcdc_buf_append_str(out, ") AND ", err);
    if (rc == MCDC_OK) rc = falls_back_sql(out, k, t, err);
    if (rc == MCDC_OK) rc = mcdc_buf_append_str(out, " THEN CAST(DATEADD(minute, -", err);
    if (rc == MCDC_OK) rc = zone_offset_sql(out, k, t, 3, err);
    if (rc == MCDC_OK) rc = mcdc_buf_printf(out, err, ", %s) AS datetime2(3)) ELSE ", t);
    if (rc == MCDC_OK) rc = mcdc_clock_sql_utc(out, k, t, false, 0, err);
    if (rc == MCDC_OK) rc = mcdc_buf_append_str(out, " END AS datetime2(3))", err);
    return rc;
}

/* ---- the client ------------------------------------------------------------- */
int mcdc_cdc_client_create(mcdc_cdc_client **out, mcdc_conn *conn, mcdc_error *err) {
    MCDC_ASSERT(out != NULL && conn != NULL);
    *out = mcdc_calloc(1, sizeof **out);
    if (*out == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    (*out)->conn = conn;
    (*out)->clock.kind = MCDC_CLOCK_UTC;
    return MCDC_OK;
}

void mcdc_cdc_client_free(mcdc_cdc_client *c) { mcdc_free(c); }
mcdc_conn *mcdc_cdc_client_conn(mcdc_cdc_client *c) { return c->conn; }
void mcdc_cdc_set_clock(mcdc_cdc_client *c, const mcdc_clock *clock) { c->clock = *clock; }
const mcdc_clock *mcdc_cdc_clock(const mcdc_cdc_client *c) { return &c->clock; }

/* Scalar LSN query: NULL or zero text -> zero LSN, *was_null set for NULL. */
static int scalar_lsn(mcdc_cdc_client *c, const char *what, const char *sql,
                      const char *const *params, int n, mcdc_lsn *out, bool *was_null,
                      mcdc_error *err) {
    char *t = NULL;
    int rc = mcdc_conn_scalar(&t, c->conn, sql, params, n, err);
    if (rc != MCDC_OK) {
        mcdc_error_wrap(err, "%s", what);
        return rc;
    }
    if (was_null) *was_null = t == NULL;
    if (t == NULL) {
        *out = mcdc_lsn_zero();
        return MCDC_OK;
    }
    rc = mcdc_lsn_parse_cstr(out, t, err);
    mcdc_free(t);
    if (rc != MCDC_OK) mcdc_error_wrap(err, "%s: the server returned", what);
    return rc;
}

int mcdc_cdc_max_lsn(mcdc_lsn *out, bool *out_was_null, mcdc_cdc_client *c, mcdc_error *err) {
    return scalar_lsn(c, "reading max_lsn",
                      "SELECT CONVERT(varchar(22), sys.fn_cdc_get_max_lsn(), 1)", NULL, 0, out,
                      out_was_null, err);
}

int mcdc_cdc_min_lsn(mcdc_lsn *out, mcdc_cdc_client *c, const char *ci, mcdc_error *err) {
    const char *p[] = {ci};
    return scalar_lsn(c, "reading min_lsn",
                      "SELECT CONVERT(varchar(22), sys.fn_cdc_get_min_lsn(?), 1)", p, 1, out,
                      NULL, err);
}

static int lsn_fn(mcdc_cdc_client *c, const char *fn, const mcdc_lsn *lsn, mcdc_lsn *out,
                  mcdc_error *err) {
    char hex[MCDC_LSN_TEXT_LEN + 1], sql[160], what[64];
    mcdc_lsn_format(lsn, hex);
    snprintf(sql, sizeof sql, "SELECT CONVERT(varchar(22), sys.%s(CONVERT(binary(10), ?, 1)), 1)",
             fn);
    snprintf(what, sizeof what, "%s(%s)", fn, hex);
    const char *p[] = {hex};
    bool was_null = false;
    int rc = scalar_lsn(c, what, sql, p, 1, out, &was_null, err);
    if (rc == MCDC_OK && was_null)
        return mcdc_error_set(err, MCDC_E_SERVER, "%s returned NULL", what);
    return rc;
}

int mcdc_cdc_increment_lsn(mcdc_lsn *out, mcdc_cdc_client *c, const mcdc_lsn *lsn,
                           mcdc_error *err) {
    return lsn_fn(c, "fn_cdc_increment_lsn", lsn, out, err);
}

int mcdc_cdc_decrement_lsn(mcdc_lsn *out, mcdc_cdc_client *c, const mcdc_lsn *lsn,
                           mcdc_error *err) {
    return lsn_fn(c, "fn_cdc_decrement_lsn", lsn, out, err);
}

static int lsn_time(mcdc_cdc_client *c, const mcdc_lsn *lsn, bool at_or_before, int64_t *out_us,
                    bool *out_found, mcdc_error *err) {
    static const char *const WHERE[] = {
        ", 126) FROM cdc.lsn_time_mapping AS m WHERE m.start_lsn = CONVERT(binary(10), ?, 1)",
        ", 126) FROM cdc.lsn_time_mapping AS m WHERE m.start_lsn <= CONVERT(binary(10), ?, 1) "
        "ORDER BY m.start_lsn DESC"};
    mcdc_buf sql = {0};
    int rc = mcdc_buf_append_str(&sql, "SELECT TOP (1) CONVERT(varchar(23), ", err);
    /* The commit's own LSN orders it in a fall-back's repeated hour, as
     * bronze's _commit_ts is ordered (clock_utc_by_lsn). */
    if (rc == MCDC_OK) rc = clock_utc_by_lsn(&sql, &c->clock, "m.tran_end_time", "m.start_lsn",
                                             NULL, 0, err);
    if (rc == MCDC_OK) rc = mcdc_buf_append_str(&sql, WHERE[at_or_before], err);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&sql, err);
    char hex[MCDC_LSN_TEXT_LEN + 1];
    mcdc_lsn_format(lsn, hex);
    const char *p[] = {hex};
    char *t = NULL;
    if (rc == MCDC_OK) rc = mcdc_conn_scalar(&t, c->conn, (const char *)sql.data, p, 1, err);
    mcdc_buf_free(&sql);
    *out_found = false;
    *out_us = 0;
    if (rc != MCDC_OK) {
        mcdc_error_wrap(err, "reading the commit time of %s", hex);
        return rc;
    }
    if (t == NULL) return MCDC_OK;
    rc = mcdc_parse_ts_us(t, strlen(t), out_us, err);
    mcdc_free(t);
    if (rc != MCDC_OK) return mcdc_error_wrap(err, "commit time of %s", hex);
    *out_found = true;
    return MCDC_OK;
}

int mcdc_cdc_lsn_to_time(int64_t *out_us, bool *out_found, mcdc_cdc_client *c, const mcdc_lsn *lsn,
                         bool at_or_before, mcdc_error *err) {
    return lsn_time(c, lsn, at_or_before, out_us, out_found, err);
}

int mcdc_cdc_time_to_lsn(mcdc_lsn *out, bool *out_found, mcdc_cdc_client *c, int64_t utc_us,
                         mcdc_error *err) {
    char ts[32];
    mcdc_format_ts_us(utc_us - ((utc_us % 1000000 + 1000000) % 1000000), 0, ts);
    mcdc_buf sql = {0};
    int rc = mcdc_buf_append_str(&sql,
                                 "SELECT CONVERT(varchar(22), sys.fn_cdc_map_time_to_lsn(N'largest "
                                 "less than or equal', ",
                                 err);
    const mcdc_clock *k = &c->clock;
    if (rc == MCDC_OK) {
        if (k->kind == MCDC_CLOCK_UTC || (k->kind == MCDC_CLOCK_FIXED && k->offset_minutes == 0))
            rc = mcdc_buf_append_str(&sql, "CONVERT(datetime2(0), ?, 126)", err);
        else if (k->kind == MCDC_CLOCK_FIXED)
            rc = mcdc_buf_printf(&sql, err, "DATEADD(minute, %d, CONVERT(datetime2(0), ?, 126))",
                                 k->offset_minutes);
        else {
            /* A fall-back repeats an hour of the zone's clock: a commit up
             * to an hour after the time can read earlier than it. The
             * server-clock time no later commit reads at or before is the
             * earlier of the time's and the next hour's less an hour (the
             * same anywhere else), as the reference maps it: a commit of
             * the repeated hour is replayed rather than skipped. */
            static const char LOCAL[] = "CONVERT(datetime2(0), (%sCONVERT(datetime2(0), ?, 126)%s "
                                        "AT TIME ZONE 'UTC') AT TIME ZONE ";
            rc = mcdc_buf_append_str(&sql, "(SELECT MIN(v) FROM (VALUES (", err);
            for (int i = 0; i < 2 && rc == MCDC_OK; i++) {
                if (i) rc = mcdc_buf_append_str(&sql, "), (DATEADD(hour, -1, ", err);
                if (rc == MCDC_OK)
                    rc = mcdc_buf_printf(&sql, err, LOCAL, i ? "DATEADD(hour, 1, " : "",
                                         i ? ")" : "");
                if (rc == MCDC_OK) rc = lit(&sql, k->zone, err);
                if (rc == MCDC_OK) rc = mcdc_buf_append_str(&sql, i ? "))" : ")", err);
            }
            if (rc == MCDC_OK) rc = mcdc_buf_append_str(&sql, ")) AS x(v))", err);
        }
    }
    if (rc == MCDC_OK) rc = mcdc_buf_append_str(&sql, "), 1)", err);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&sql, err);
    const char *p[] = {ts, ts};
    bool was_null = false;
    if (rc == MCDC_OK)
        rc = scalar_lsn(c, "mapping a time to an LSN", (const char *)sql.data, p,
                        k->kind == MCDC_CLOCK_ZONE ? 2 : 1, out, &was_null, err);
    mcdc_buf_free(&sql);
    *out_found = rc == MCDC_OK && !was_null && !mcdc_lsn_is_zero(out);
    return rc;
}

int mcdc_cdc_nth_commit_after(mcdc_lsn *out, bool *out_found, mcdc_cdc_client *c,
                              const mcdc_lsn *lsn, int64_t n, mcdc_error *err) {
    if (n < 1) return mcdc_error_set(err, MCDC_E_INVALID, "nth_commit_after: n must be >= 1");
    char sql[400], hex[MCDC_LSN_TEXT_LEN + 1];
    snprintf(sql, sizeof sql,
             "SELECT CONVERT(varchar(22), MAX(t.start_lsn), 1) FROM (SELECT TOP (%lld) "
             "m.start_lsn FROM cdc.lsn_time_mapping AS m WHERE m.start_lsn > "
             "CONVERT(binary(10), ?, 1) ORDER BY m.start_lsn) AS t",
             (long long)n);
    mcdc_lsn_format(lsn, hex);
    const char *p[] = {hex};
    bool was_null = false;
    int rc = scalar_lsn(c, "counting commits", sql, p, 1, out, &was_null, err);
    *out_found = rc == MCDC_OK && !was_null;
    return rc;
}

/* ---- reading result rows ------------------------------------------------------ */
typedef int (*row_fn)(void *ctx, const mcdc_batch *b, int64_t row, mcdc_error *err);

static int for_each_row(mcdc_cdc_client *c, const char *sql, const char *const *p, int n,
                        row_fn fn, void *ctx, mcdc_error *err) {
    mcdc_result *r = NULL;
    int rc = mcdc_conn_exec(&r, c->conn, sql, p, n, err);
    if (rc != MCDC_OK) return rc;
    for (;;) {
        mcdc_batch *b = NULL;
        rc = mcdc_result_next_batch(&b, r, 1024, err);
        if (rc != MCDC_OK || b == NULL) break;
        for (int64_t i = 0; i < b->rows && rc == MCDC_OK; i++) rc = fn(ctx, b, i, err);
        mcdc_batch_free(b);
        if (rc != MCDC_OK) break;
    }
    mcdc_result_free(r);
    return rc;
}

static int col_of(const mcdc_batch *b, const char *name) {
    int32_t i = mcdc_schema_find(b->schema, name);
    if (i >= 0) return i;
    for (int32_t k = 0; k < b->schema->n_fields; k++)
        if (mcdc_str_ieq(b->schema->fields[k].name, name)) return k;
    return -1;
}

/* Text of a cell (utf8 as is, binary as 0x hex, numbers in decimal) into
 * buf; false for NULL or a missing column. */
static bool cell(const mcdc_batch *b, const char *name, int64_t row, char *buf, size_t n) {
    int i = col_of(b, name);
    if (i < 0 || !mcdc_col_is_valid(&b->columns[i], row)) return false;
    const mcdc_column *c = &b->columns[i];
    switch (c->field->type) {
    case MCDC_TYPE_UTF8: {
        size_t len = (size_t)(c->offsets[row + 1] - c->offsets[row]);
        if (len >= n) len = n - 1;
        memcpy(buf, c->data + c->offsets[row], len);
        buf[len] = 0;
        return true;
    }
    case MCDC_TYPE_BINARY: {
        int32_t len = c->offsets[row + 1] - c->offsets[row];
        static const char hex[] = "0123456789ABCDEF";
        size_t k = 0;
        buf[k++] = '0';
        buf[k++] = 'x';
        for (int32_t j = 0; j < len && k + 3 < n; j++) {
            uint8_t v = c->data[c->offsets[row] + j];
            buf[k++] = hex[v >> 4];
            buf[k++] = hex[v & 15];
        }
        buf[k] = 0;
        return true;
    }
    case MCDC_TYPE_BOOL:
        snprintf(buf, n, "%d", (c->values[row >> 3] >> (row & 7)) & 1);
        return true;
    case MCDC_TYPE_INT8: snprintf(buf, n, "%d", ((const int8_t *)c->values)[row]); return true;
    case MCDC_TYPE_INT16: {
        int16_t v;
        memcpy(&v, c->values + row * 2, 2);
        snprintf(buf, n, "%d", v);
        return true;
    }
    case MCDC_TYPE_INT32: {
        int32_t v;
        memcpy(&v, c->values + row * 4, 4);
        snprintf(buf, n, "%d", v);
        return true;
    }
    case MCDC_TYPE_INT64: {
        int64_t v;
        memcpy(&v, c->values + row * 8, 8);
        snprintf(buf, n, "%lld", (long long)v);
        return true;
    }
    case MCDC_TYPE_DECIMAL: {
        int64_t lo;
        memcpy(&lo, c->values + row * 16, 8);
        int64_t scale = 1;
        for (int s = 0; s < c->field->scale; s++) scale *= 10;
        snprintf(buf, n, "%lld", (long long)(lo / scale));
        return true;
    }
    case MCDC_TYPE_TIMESTAMP_NTZ:
    case MCDC_TYPE_TIMESTAMP_UTC: {
        int64_t v;
        char t[32];
        memcpy(&v, c->values + row * 8, 8);
        mcdc_format_ts_us(v, 6, t);
        snprintf(buf, n, "%s", t);
        return true;
    }
    default: return false;
    }
}

static int cell_int(const mcdc_batch *b, const char *name, int64_t row, int64_t dflt) {
    char t[64];
    int64_t v;
    if (!cell(b, name, row, t, sizeof t) || mcdc_parse_i64(t, &v) != MCDC_OK) return (int)dflt;
    return (int)v;
}

/* ---- split points --------------------------------------------------------------- */
typedef struct {
    mcdc_split_point *v;
    int n, cap;
} split_acc;

static int split_row(void *ctx, const mcdc_batch *b, int64_t row, mcdc_error *err) {
    split_acc *a = ctx;
    char bound[64], next[64], rows[32];
    if (!cell(b, "bound", row, bound, sizeof bound) ||
        !cell(b, "next_start", row, next, sizeof next) ||
        !cell(b, "row_count", row, rows, sizeof rows))
        return mcdc_error_set(err, MCDC_E_PROTOCOL, "split_points: a row with NULL columns");
    mcdc_split_point sp;
    int64_t nrows;
    if (mcdc_lsn_parse_cstr(&sp.bound, bound, err) != MCDC_OK ||
        mcdc_lsn_parse_cstr(&sp.next_start, next, err) != MCDC_OK ||
        mcdc_parse_i64(rows, &nrows) != MCDC_OK)
        return mcdc_error_set(err, MCDC_E_PROTOCOL, "split_points: a malformed row");
    sp.rows = nrows;
    /* A commit split across tiles stays in the first: fold its later tile. */
    if (a->n > 0 && mcdc_lsn_cmp(&sp.bound, &a->v[a->n - 1].bound) <= 0) {
        a->v[a->n - 1].rows += sp.rows;
        return MCDC_OK;
    }
    if (a->n == a->cap) {
        int cap = a->cap ? a->cap * 2 : 16;
        mcdc_split_point *v = mcdc_realloc(a->v, sizeof *v * (size_t)cap);
        if (v == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = sp;
    return MCDC_OK;
}

int mcdc_cdc_split_points(mcdc_split_point **out, int *out_n, mcdc_cdc_client *c, const char *ci,
                          const mcdc_lsn *from, const mcdc_lsn *to, int n, mcdc_error *err) {
    *out = NULL;
    *out_n = 0;
    int rc = mcdc_validate_capture_instance(ci, err);
    if (rc != MCDC_OK) return rc;
    if (n < 1 || n > MCDC_PARTITIONS_MAX * 16)
        return mcdc_error_set(err, MCDC_E_INVALID, "split_points: %d tiles", n);
    mcdc_buf sql = {0};
    rc = mcdc_buf_printf(&sql, err,
                         "SELECT CONVERT(varchar(22), MAX(t.lsn), 1) AS bound, "
                         "CONVERT(varchar(22), sys.fn_cdc_increment_lsn(MAX(t.lsn)), 1) AS "
                         "next_start, COUNT_BIG(*) AS row_count FROM (SELECT c.__$start_lsn AS "
                         "lsn, NTILE(%d) OVER (ORDER BY c.__$start_lsn) AS tile FROM cdc.[%s_CT] "
                         "AS c WHERE c.__$start_lsn BETWEEN CONVERT(binary(10), ?, 1) AND "
                         "CONVERT(binary(10), ?, 1)) AS t GROUP BY t.tile ORDER BY t.tile",
                         n, ci);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&sql, err);
    char f[MCDC_LSN_TEXT_LEN + 1], t[MCDC_LSN_TEXT_LEN + 1];
    mcdc_lsn_format(from, f);
    mcdc_lsn_format(to, t);
    const char *p[] = {f, t};
    split_acc a = {0};
    if (rc == MCDC_OK) rc = for_each_row(c, (const char *)sql.data, p, 2, split_row, &a, err);
    mcdc_buf_free(&sql);
    if (rc != MCDC_OK) {
        mcdc_free(a.v);
        mcdc_error_wrap(err, "split_points of %s [%s, %s]", ci, f, t);
        return rc;
    }
    *out = a.v;
    *out_n = a.n;
    return MCDC_OK;
}

/* ---- captured columns and type mapping -------------------------------------------- */
typedef struct {
    mcdc_captured_column *v;
    int n, cap;
} cols_acc;

static int cols_row(void *ctx, const mcdc_batch *b, int64_t row, mcdc_error *err) {
    cols_acc *a = ctx;
    char name[MCDC_IDENT_BYTES_MAX + 1], type[MCDC_IDENT_BYTES_MAX + 1];
    if (!cell(b, "column_name", row, name, sizeof name) ||
        !cell(b, "data_type", row, type, sizeof type))
        return mcdc_error_set(err, MCDC_E_PROTOCOL,
                              "sp_cdc_get_captured_columns: a row without column_name or "
                              "data_type");
    if (a->n == a->cap) {
        int cap = a->cap ? a->cap * 2 : 16;
        if (cap > MCDC_COLUMNS_MAX)
            return mcdc_error_set(err, MCDC_E_LIMIT, "more than %d captured columns",
                                  MCDC_COLUMNS_MAX);
        mcdc_captured_column *v = mcdc_realloc(a->v, sizeof *v * (size_t)cap);
        if (v == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        a->v = v;
        a->cap = cap;
    }
    mcdc_captured_column *c = &a->v[a->n];
    memset(c, 0, sizeof *c);
    for (char *q = type; *q; q++) *q = (char)tolower((unsigned char)*q);
    c->name = mcdc_strdup(name);
    c->data_type = mcdc_strdup(type);
    if (c->name == NULL || c->data_type == NULL) {
        mcdc_free(c->name);
        mcdc_free(c->data_type);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    c->column_id = cell_int(b, "column_id", row, 0);
    c->ordinal = cell_int(b, "column_ordinal", row, a->n + 1);
    c->precision = cell_int(b, "numeric_precision", row, 0);
    c->scale = cell_int(b, "numeric_scale", row, 0);
    c->max_length = cell_int(b, "character_maximum_length", row, 0);
    c->datetime_precision = cell_int(b, "datetime_precision", row, 0);
    a->n++;
    return MCDC_OK;
}

static int by_ordinal(const void *x, const void *y) {
    const mcdc_captured_column *a = x, *b = y;
    return (a->ordinal > b->ordinal) - (a->ordinal < b->ordinal);
}

void mcdc_captured_columns_free(mcdc_captured_column *cols, int n) {
    for (int i = 0; cols && i < n; i++) {
        mcdc_free(cols[i].name);
        mcdc_free(cols[i].data_type);
    }
    mcdc_free(cols);
}

int mcdc_cdc_captured_columns(mcdc_captured_column **out, int *out_n, mcdc_cdc_client *c,
                              const char *ci, mcdc_error *err) {
    *out = NULL;
    *out_n = 0;
    int rc = mcdc_validate_capture_instance(ci, err);
    if (rc != MCDC_OK) return rc;
    const char *p[] = {ci};
    cols_acc a = {0};
    rc = for_each_row(c, "EXEC sys.sp_cdc_get_captured_columns @capture_instance = ?", p, 1,
                      cols_row, &a, err);
    if (rc != MCDC_OK) {
        mcdc_captured_columns_free(a.v, a.n);
        mcdc_error_wrap(err, "reading the captured columns of %s", ci);
        return rc;
    }
    if (a.n > 1) qsort(a.v, (size_t)a.n, sizeof *a.v, by_ordinal);
    *out = a.v;
    *out_n = a.n;
    return MCDC_OK;
}

int mcdc_cdc_map_type(mcdc_type_id *out_type, int32_t *out_precision, int32_t *out_scale,
                      const mcdc_captured_column *col, mcdc_error *err) {
    const char *t = col->data_type;
    *out_precision = *out_scale = 0;
    const mcdc_sql_type *st = mcdc_sql_type_named(t);
    if (st == NULL || !st->has_default)
        return mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                              "column '%s' has SQL Server type %s, which has no default type; "
                              "pass columns (the columns option) with a type to read it as, or "
                              "leave the column out",
                              col->name, t);
    if (st->type == MCDC_TYPE_DECIMAL && st->precision < 0 &&
        (col->precision < 1 || col->precision > 38 || col->scale < 0 ||
         col->scale > col->precision))
        return mcdc_error_set(err, MCDC_E_PROTOCOL,
                              "column '%s': %s(%d,%d) is not a valid decimal", col->name, t,
                              col->precision, col->scale);
    mcdc_sql_type_batch(st, col->precision, col->scale, out_type, out_precision, out_scale);
    return MCDC_OK;
}

/* ---- capture instances ------------------------------------------------------------ */
typedef struct {
    mcdc_capture_instance *v;
    int n, cap;
} ci_acc;

/* "[a], [b]]c]" -> {"a", "b]c"} */
static int parse_key_list(const char *s, char ***out, int *out_n, mcdc_error *err) {
    *out = NULL;
    *out_n = 0;
    char **keys = NULL;
    int n = 0;
    const char *p = s;
    while (*p) {
        while (*p == ' ' || *p == ',') p++;
        if (!*p) break;
        mcdc_buf name = {0};
        if (*p == '[') {
            p++;
            while (*p) {
                if (*p == ']') {
                    if (p[1] == ']') {
                        mcdc_buf_append_byte(&name, ']', NULL);
                        p += 2;
                        continue;
                    }
                    p++;
                    break;
                }
                mcdc_buf_append_byte(&name, (uint8_t)*p++, NULL);
            }
        } else {
            while (*p && *p != ',') mcdc_buf_append_byte(&name, (uint8_t)*p++, NULL);
        }
        if (mcdc_buf_cstr(&name, NULL) != MCDC_OK) goto nomem;
        char **k = mcdc_realloc(keys, sizeof *k * (size_t)(n + 1));
        if (k == NULL) {
            mcdc_buf_free(&name);
            goto nomem;
        }
        keys = k;
        keys[n++] = (char *)name.data;
    }
    *out = keys;
    *out_n = n;
    return MCDC_OK;
nomem:
    for (int i = 0; i < n; i++) mcdc_free(keys[i]);
    mcdc_free(keys);
    return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
}

void mcdc_capture_instances_free(mcdc_capture_instance *v, int n) {
    for (int i = 0; v && i < n; i++) {
        mcdc_free(v[i].name);
        mcdc_free(v[i].source_schema);
        mcdc_free(v[i].source_table);
        for (int k = 0; k < v[i].n_keys; k++) mcdc_free(v[i].keys[k]);
        mcdc_free(v[i].keys);
    }
    mcdc_free(v);
}

static int ci_row(void *ctx, const mcdc_batch *b, int64_t row, mcdc_error *err) {
    ci_acc *a = ctx;
    char name[MCDC_IDENT_BYTES_MAX + 1], sch[MCDC_IDENT_BYTES_MAX + 1],
        tab[MCDC_IDENT_BYTES_MAX + 1], lsn[64], created[64], keys[4096];
    if (!cell(b, "capture_instance", row, name, sizeof name) ||
        !cell(b, "source_schema", row, sch, sizeof sch) ||
        !cell(b, "source_table", row, tab, sizeof tab))
        return mcdc_error_set(err, MCDC_E_PROTOCOL,
                              "sp_cdc_help_change_data_capture: a row without names");
    if (a->n == a->cap) {
        int cap = a->cap ? a->cap * 2 : 8;
        mcdc_capture_instance *v = mcdc_realloc(a->v, sizeof *v * (size_t)cap);
        if (v == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        a->v = v;
        a->cap = cap;
    }
    mcdc_capture_instance *ci = &a->v[a->n];
    memset(ci, 0, sizeof *ci);
    a->n++;
    ci->name = mcdc_strdup(name);
    ci->source_schema = mcdc_strdup(sch);
    ci->source_table = mcdc_strdup(tab);
    if (!ci->name || !ci->source_schema || !ci->source_table)
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    if (cell(b, "start_lsn", row, lsn, sizeof lsn) &&
        mcdc_lsn_parse_cstr(&ci->start_lsn, lsn, err) != MCDC_OK)
        return err ? err->code : MCDC_E_PROTOCOL;
    if (cell(b, "create_date", row, created, sizeof created))
        mcdc_parse_ts_us(created, strlen(created), &ci->create_date_us, NULL);
    if (cell(b, "index_column_list", row, keys, sizeof keys))
        return parse_key_list(keys, &ci->keys, &ci->n_keys, err);
    return MCDC_OK;
}

static int ci_order(const void *x, const void *y) {
    const mcdc_capture_instance *a = x, *b = y;
    if (a->create_date_us != b->create_date_us)
        return a->create_date_us < b->create_date_us ? -1 : 1;
    return mcdc_lsn_cmp(&a->start_lsn, &b->start_lsn);
}

int mcdc_cdc_capture_instances(mcdc_capture_instance **out, int *out_n, mcdc_cdc_client *c,
                               const char *source_schema, const char *source_table,
                               mcdc_error *err) {
    *out = NULL;
    *out_n = 0;
    ci_acc a = {0};
    int rc;
    if (source_schema && source_table) {
        const char *p[] = {source_schema, source_table};
        rc = for_each_row(c,
                          "EXEC sys.sp_cdc_help_change_data_capture @source_schema = ?, "
                          "@source_name = ?",
                          p, 2, ci_row, &a, err);
    } else {
        rc = for_each_row(c, "EXEC sys.sp_cdc_help_change_data_capture", NULL, 0, ci_row, &a,
                          err);
    }
    if (rc != MCDC_OK) {
        mcdc_capture_instances_free(a.v, a.n);
        mcdc_error_wrap(err, "listing capture instances");
        return rc;
    }
    if (a.n > 1) qsort(a.v, (size_t)a.n, sizeof *a.v, ci_order);
    *out = a.v;
    *out_n = a.n;
    return MCDC_OK;
}

/* ---- DDL history --------------------------------------------------------------------- */
typedef struct {
    mcdc_ddl_event *v;
    int n, cap;
    mcdc_lsn from, to;
} ddl_acc;

void mcdc_ddl_events_free(mcdc_ddl_event *v, int n) {
    for (int i = 0; v && i < n; i++) mcdc_free(v[i].command);
    mcdc_free(v);
}

static int ddl_row(void *ctx, const mcdc_batch *b, int64_t row, mcdc_error *err) {
    ddl_acc *a = ctx;
    char lsn[64];
    if (!cell(b, "ddl_lsn", row, lsn, sizeof lsn)) return MCDC_OK;
    mcdc_lsn l;
    if (mcdc_lsn_parse_cstr(&l, lsn, err) != MCDC_OK) return MCDC_E_PROTOCOL;
    if (mcdc_lsn_cmp(&l, &a->from) <= 0 || mcdc_lsn_cmp(&l, &a->to) > 0) return MCDC_OK;
    if (a->n == a->cap) {
        int cap = a->cap ? a->cap * 2 : 4;
        mcdc_ddl_event *v = mcdc_realloc(a->v, sizeof *v * (size_t)cap);
        if (v == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        a->v = v;
        a->cap = cap;
    }
    int i = col_of(b, "ddl_command");
    char *cmd = NULL;
    if (i >= 0 && mcdc_col_is_valid(&b->columns[i], row) &&
        b->columns[i].field->type == MCDC_TYPE_UTF8) {
        const mcdc_column *cc = &b->columns[i];
        cmd = mcdc_strndup((const char *)cc->data + cc->offsets[row],
                           (size_t)(cc->offsets[row + 1] - cc->offsets[row]));
    } else {
        cmd = mcdc_strdup("");
    }
    if (cmd == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    a->v[a->n].ddl_lsn = l;
    a->v[a->n].command = cmd;
    a->n++;
    return MCDC_OK;
}

int mcdc_cdc_ddl_history(mcdc_ddl_event **out, int *out_n, mcdc_cdc_client *c, const char *ci,
                         const mcdc_lsn *from, const mcdc_lsn *to, mcdc_error *err) {
    *out = NULL;
    *out_n = 0;
    int rc = mcdc_validate_capture_instance(ci, err);
    if (rc != MCDC_OK) return rc;
    const char *p[] = {ci};
    ddl_acc a = {0};
    a.from = *from;
    a.to = *to;
    rc = for_each_row(c, "EXEC sys.sp_cdc_get_ddl_history @capture_instance = ?", p, 1, ddl_row,
                      &a, err);
    if (rc != MCDC_OK) {
        mcdc_ddl_events_free(a.v, a.n);
        mcdc_error_wrap(err, "reading the DDL history of %s", ci);
        return rc;
    }
    *out = a.v;
    *out_n = a.n;
    return MCDC_OK;
}

/* ---- time zones ------------------------------------------------------------------------ */
int mcdc_cdc_utc_now(int64_t *out_us, mcdc_cdc_client *c, mcdc_error *err) {
    char *t = NULL;
    int rc = mcdc_conn_scalar(&t, c->conn, "SELECT SYSUTCDATETIME()", NULL, 0, err);
    if (rc == MCDC_OK && (t == NULL || mcdc_parse_ts_us(t, strlen(t), out_us, NULL) != MCDC_OK))
        rc = mcdc_error_set(err, MCDC_E_PROTOCOL, "SYSUTCDATETIME() returned %s", t ? t : "NULL");
    mcdc_free(t);
    return rc;
}

int mcdc_cdc_detect_clock(mcdc_clock *out, mcdc_cdc_client *c, mcdc_error *err) {
    memset(out, 0, sizeof *out);
    mcdc_result *r = NULL;
    int rc = mcdc_conn_exec(&r, c->conn,
                            "SELECT CONVERT(int, SERVERPROPERTY('ProductMajorVersion')) AS "
                            "major_version, CONVERT(int, SERVERPROPERTY('EngineEdition')) AS "
                            "engine_edition",
                            NULL, 0, err);
    if (rc != MCDC_OK) return mcdc_error_wrap(err, "probing the server version");
    mcdc_batch *b = NULL;
    rc = mcdc_result_next_batch(&b, r, 1, err);
    int major = 0, edition = 0;
    if (rc == MCDC_OK && b && b->rows > 0) {
        major = cell_int(b, "major_version", 0, 0);
        edition = cell_int(b, "engine_edition", 0, 0);
    }
    mcdc_batch_free(b);
    mcdc_result_free(r);
    if (rc != MCDC_OK) return mcdc_error_wrap(err, "probing the server version");
    char *t = NULL;
    if (major >= 16 || edition == 5 || edition == 8) {
        rc = mcdc_conn_scalar(&t, c->conn, "SELECT CURRENT_TIMEZONE_ID()", NULL, 0, err);
        if (rc != MCDC_OK) return mcdc_error_wrap(err, "reading the server time zone");
        if (t == NULL) return mcdc_error_set(err, MCDC_E_SERVER, "CURRENT_TIMEZONE_ID() is NULL");
        rc = mcdc_clock_from_name(out, t, err);
        mcdc_free(t);
        return rc;
    }
    rc = mcdc_conn_scalar(&t, c->conn, "SELECT DATEPART(TZOFFSET, SYSDATETIMEOFFSET())", NULL, 0,
                          err);
    if (rc != MCDC_OK) return mcdc_error_wrap(err, "reading the server UTC offset");
    int64_t off = 0;
    if (t == NULL || mcdc_parse_i64(t, &off) != MCDC_OK || off < -840 || off > 840) {
        mcdc_free(t);
        return mcdc_error_set(err, MCDC_E_PROTOCOL, "the server's UTC offset is not a number");
    }
    mcdc_free(t);
    out->kind = MCDC_CLOCK_FIXED;
    out->offset_minutes = (int)off;
    char desc[MCDC_ZONE_NAME_MAX + 16];
    mcdc_clock_describe(desc, out);
    mcdc_log(MCDC_LOG_WARN,
             "SQL Server %d has no CURRENT_TIMEZONE_ID(): converting commit times with the "
             "server's current offset %s, which is wrong across a daylight-saving change; set "
             "sourceTimeZone to the server's Windows time zone name",
             major, desc);
    return MCDC_OK;
}

int mcdc_cdc_check_zone(mcdc_cdc_client *c, const mcdc_clock *clock, mcdc_error *err) {
    if (clock->kind != MCDC_CLOCK_ZONE) return MCDC_OK;
    /* the name's characters are checked (mcdc_clock_from_name): no quote */
    char sql[MCDC_ZONE_NAME_MAX + 96];
    snprintf(sql, sizeof sql, "SELECT DATEPART(TZOFFSET, SYSDATETIME() AT TIME ZONE N'%s')",
             clock->zone);
    char *t = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_conn_scalar(&t, c->conn, sql, NULL, 0, &e);
    mcdc_free(t);
    if (rc == MCDC_E_SERVER)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "sourceTimeZone '%s' is not a time zone this server knows (%s): "
                              "give the Windows name of the server's zone as sys.time_zone_info "
                              "lists it ('W. Europe Standard Time'), UTC, or auto",
                              clock->zone, e.message);
    if (rc && err) *err = e;
    return rc;
}

int mcdc_cdc_range_offset(int *out_minutes, bool *out_known, mcdc_cdc_client *c,
                          const mcdc_lsn *from, const mcdc_lsn *to, mcdc_error *err) {
    *out_known = false;
    *out_minutes = 0;
    if (c->clock.kind == MCDC_CLOCK_UTC) {
        *out_known = true;
        return MCDC_OK;
    }
    if (c->clock.kind == MCDC_CLOCK_FIXED) {
        *out_known = true;
        *out_minutes = c->clock.offset_minutes;
        return MCDC_OK;
    }
    char f[MCDC_LSN_TEXT_LEN + 1], t[MCDC_LSN_TEXT_LEN + 1];
    mcdc_lsn_format(from, f);
    mcdc_lsn_format(to, t);
    const char *p[] = {c->clock.zone, c->clock.zone, c->clock.zone, f, t};
    char *v = NULL;
    int rc = mcdc_conn_scalar(
        &v, c->conn,
        "SELECT CASE WHEN DATEDIFF(day, MIN(m.tran_end_time), MAX(m.tran_end_time)) < 7 AND "
        "DATEPART(TZOFFSET, DATEADD(hour, -3, MIN(m.tran_end_time)) AT TIME ZONE ?) = "
        "DATEPART(TZOFFSET, DATEADD(hour, 3, MAX(m.tran_end_time)) AT TIME ZONE ?) THEN "
        "DATEPART(TZOFFSET, DATEADD(hour, 3, MAX(m.tran_end_time)) AT TIME ZONE ?) END FROM "
        "cdc.lsn_time_mapping AS m WHERE m.start_lsn BETWEEN CONVERT(binary(10), ?, 1) AND "
        "CONVERT(binary(10), ?, 1)",
        p, 5, err);
    if (rc != MCDC_OK) return mcdc_error_wrap(err, "reading the UTC offset of [%s, %s]", f, t);
    if (v != NULL) {
        int64_t o;
        if (mcdc_parse_i64(v, &o) == MCDC_OK && o >= -840 && o <= 840) {
            *out_known = true;
            *out_minutes = (int)o;
        }
        mcdc_free(v);
    }
    return MCDC_OK;
}

typedef struct {
    mcdc_clock_drop *v;
    int n;
} drops_acc;

static int drop_row(void *ctx, const mcdc_batch *b, int64_t row, mcdc_error *err) {
    drops_acc *a = ctx;
    char lsn[64], t[64];
    if (!cell(b, "start_lsn", row, lsn, sizeof lsn) || !cell(b, "local_time", row, t, sizeof t))
        return MCDC_OK;
    if (a->n >= MCDC_CLOCK_DROPS_MAX)
        return mcdc_error_set(err, MCDC_E_LIMIT,
                              "more than %d clock drops in one range: the server clock went "
                              "back that often",
                              MCDC_CLOCK_DROPS_MAX);
    if (mcdc_lsn_parse_cstr(&a->v[a->n].lsn, lsn, err) != MCDC_OK) return MCDC_E_PROTOCOL;
    t[sizeof a->v[a->n].local_time - 1] = 0;
    memcpy(a->v[a->n].local_time, t, strlen(t) + 1);
    a->n++;
    return MCDC_OK;
}

int mcdc_cdc_clock_drops(mcdc_clock_drop *out, int *out_n, mcdc_cdc_client *c, const mcdc_lsn *from,
                         const mcdc_lsn *to, mcdc_error *err) {
    *out_n = 0;
    if (c->clock.kind != MCDC_CLOCK_ZONE) return MCDC_OK;
    char f[MCDC_LSN_TEXT_LEN + 1], t[MCDC_LSN_TEXT_LEN + 1];
    mcdc_lsn_format(from, f);
    mcdc_lsn_format(to, t);
    /* From the last entry at least 3 h before the range's first commit up
     * to the range's end: entries more than a minute earlier than their
     * predecessor, at a repeated local time. */
    const char *p[] = {f, t, c->clock.zone, c->clock.zone};
    drops_acc a = {out, 0};
    int rc = for_each_row(
        c,
        "SELECT CONVERT(varchar(22), d.start_lsn, 1) AS start_lsn, CONVERT(varchar(23), "
        "d.tran_end_time, 126) AS local_time FROM (SELECT m.start_lsn, m.tran_end_time, "
        "LAG(m.tran_end_time) OVER (ORDER BY m.start_lsn) AS prev_time FROM cdc.lsn_time_mapping "
        "AS m WHERE m.start_lsn >= ISNULL((SELECT TOP (1) b.start_lsn FROM cdc.lsn_time_mapping "
        "AS b WHERE b.tran_end_time <= DATEADD(hour, -3, (SELECT TOP (1) f.tran_end_time FROM "
        "cdc.lsn_time_mapping AS f WHERE f.start_lsn >= CONVERT(binary(10), ?, 1) ORDER BY "
        "f.start_lsn)) ORDER BY b.tran_end_time DESC), 0x00000000000000000000) AND m.start_lsn <= "
        "CONVERT(binary(10), ?, 1)) AS d WHERE d.tran_end_time < DATEADD(minute, -1, d.prev_time) "
        "AND DATEPART(TZOFFSET, DATEADD(hour, 3, d.tran_end_time) AT TIME ZONE ?) < "
        "DATEPART(TZOFFSET, d.tran_end_time AT TIME ZONE ?) ORDER BY d.start_lsn",
        p, 4, drop_row, &a, err);
    if (rc != MCDC_OK) return mcdc_error_wrap(err, "looking for clock drops in [%s, %s]", f, t);
    *out_n = a.n;
    return MCDC_OK;
}

int mcdc_cdc_commit_time_sql(mcdc_buf *out, mcdc_cdc_client *c, const mcdc_lsn *from,
                             const mcdc_lsn *to, const char *t, const char *lsn, mcdc_error *err) {
    int off = 0;
    bool known = false;
    int rc = mcdc_cdc_range_offset(&off, &known, c, from, to, err);
    if (rc != MCDC_OK) return rc;
    if (known) return mcdc_clock_sql_utc(out, &c->clock, t, true, off, err);
    mcdc_clock_drop drops[MCDC_CLOCK_DROPS_MAX];
    int nd = 0;
    rc = mcdc_cdc_clock_drops(drops, &nd, c, from, to, err);
    if (rc != MCDC_OK) return rc;
    if (nd == 0) return mcdc_clock_sql_utc(out, &c->clock, t, false, 0, err);
    return clock_utc_by_lsn(out, &c->clock, t, lsn, drops, nd, err);
}

/* ---- metrics and permissions ------------------------------------------------------------ */
int mcdc_cdc_ping(double *out_ms, mcdc_cdc_client *c, mcdc_error *err) {
    int64_t t0 = mcdc_monotonic_us();
    char *t = NULL;
    int rc = mcdc_conn_scalar(&t, c->conn, "SELECT 1", NULL, 0, err);
    int64_t t1 = mcdc_monotonic_us();
    mcdc_free(t);
    *out_ms = rc == MCDC_OK ? (double)(t1 - t0) / 1000.0 : 0.0;
    return rc;
}

void mcdc_cdc_network_wait_ms(int64_t *out_ms, bool *out_known, mcdc_cdc_client *c) {
    char *t = NULL;
    *out_ms = 0;
    *out_known = false;
    mcdc_error e = MCDC_ERROR_INIT;
    if (mcdc_conn_scalar(&t, c->conn,
                         "SELECT ISNULL(SUM(w.wait_time_ms), 0) FROM "
                         "sys.dm_exec_session_wait_stats AS w WHERE w.session_id = @@SPID AND "
                         "w.wait_type = N'ASYNC_NETWORK_IO'",
                         NULL, 0, &e) != MCDC_OK) {
        mcdc_log(MCDC_LOG_DEBUG, "network wait unknown: %s", e.message);
        return;
    }
    int64_t v = 0;
    if (t == NULL) {
        *out_known = true;
    } else if (mcdc_parse_i64(t, &v) == MCDC_OK) {
        *out_ms = v;
        *out_known = true;
    }
    mcdc_free(t);
}

/* *out 1, 0 or -1 (NULL): HAS_PERMS_BY_NAME on cdc.[<ci>_CT], gated on the
 * instance's min_lsn (the reference's row 25) or not. */
static int change_table_perm(int *out, mcdc_cdc_client *c, const char *ci, bool gate,
                             mcdc_error *err) {
    *out = -1;
    int rc = mcdc_validate_capture_instance(ci, err);
    if (rc != MCDC_OK) return rc;
    char obj[MCDC_IDENT_BYTES_MAX + 16];
    snprintf(obj, sizeof obj, "cdc.[%s_CT]", ci);
    const char *p[] = {ci, obj};
    char *t = NULL;
    rc = gate ? mcdc_conn_scalar(&t, c->conn,
                                 "SELECT CASE WHEN sys.fn_cdc_get_min_lsn(?) > "
                                 "0x00000000000000000000 THEN HAS_PERMS_BY_NAME(?, 'OBJECT', "
                                 "'SELECT') END",
                                 p, 2, err)
              : mcdc_conn_scalar(&t, c->conn, "SELECT HAS_PERMS_BY_NAME(?, 'OBJECT', 'SELECT')",
                                 p + 1, 1, err);
    if (rc != MCDC_OK) return mcdc_error_wrap(err, "checking SELECT permission on %s", obj);
    int64_t v;
    if (t && mcdc_parse_i64(t, &v) == MCDC_OK) *out = v ? 1 : 0;
    mcdc_free(t);
    return MCDC_OK;
}

int mcdc_cdc_has_select(int *out, mcdc_cdc_client *c, const char *ci, mcdc_error *err) {
    return change_table_perm(out, c, ci, true, err);
}

int mcdc_cdc_may_read(int *out, mcdc_cdc_client *c, const char *ci, mcdc_error *err) {
    return change_table_perm(out, c, ci, false, err);
}

/* ---- the capture job's health ------------------------------------------------------- */

/* Session 0 sums every session; the newest session's empty_scan_count
 * counts the empty scans in a row; its end on the server's clock, and that
 * clock now next to UTC now, make the end UTC whatever the zone. */
static const char CAPTURE_HEALTH_SQL[] =
    "SELECT (SELECT latency FROM sys.dm_cdc_log_scan_sessions WHERE session_id = 0) AS latency, "
    "(SELECT error_count FROM sys.dm_cdc_log_scan_sessions WHERE session_id = 0) AS error_count, "
    "(SELECT failed_sessions_count FROM sys.dm_cdc_log_scan_sessions WHERE session_id = 0) "
    "AS failed_sessions, "
    "(SELECT tran_count FROM sys.dm_cdc_log_scan_sessions WHERE session_id = 0) AS transactions, "
    "(SELECT MAX(session_id) FROM sys.dm_cdc_log_scan_sessions) AS newest, "
    "(SELECT empty_scan_count FROM sys.dm_cdc_log_scan_sessions WHERE session_id = "
    "(SELECT MAX(session_id) FROM sys.dm_cdc_log_scan_sessions)) AS empty_scans, "
    "(SELECT end_time FROM sys.dm_cdc_log_scan_sessions WHERE session_id = "
    "(SELECT MAX(session_id) FROM sys.dm_cdc_log_scan_sessions)) AS last_end, "
    "(SELECT COUNT(*) FROM sys.dm_cdc_errors) AS errors_listed, "
    "SYSDATETIME() AS now_local, SYSUTCDATETIME() AS now_utc";

static bool cell_i64(const mcdc_batch *b, const char *name, int64_t *out) {
    char t[64];
    return cell(b, name, 0, t, sizeof t) && mcdc_parse_i64(t, out) == MCDC_OK;
}

static bool cell_ts(const mcdc_batch *b, const char *name, int64_t *out) {
    char t[64];
    return cell(b, name, 0, t, sizeof t) && mcdc_parse_ts_us(t, strlen(t), out, NULL) == MCDC_OK;
}

int mcdc_cdc_capture_health(mcdc_capture_health *out, mcdc_cdc_client *c, mcdc_error *err) {
    out->visible = false;
    mcdc_result *r = NULL;
    mcdc_error why = MCDC_ERROR_INIT;
    int rc = mcdc_conn_exec(&r, c->conn, CAPTURE_HEALTH_SQL, NULL, 0, &why);
    if (rc == MCDC_E_PERMISSION) return MCDC_OK; /* no VIEW DATABASE STATE: not visible */
    if (rc != MCDC_OK) {
        if (err) *err = why;
        return mcdc_error_wrap(err, "reading the capture job's sessions");
    }
    mcdc_batch *b = NULL;
    rc = mcdc_result_next_batch(&b, r, 1, err);
    if (rc == MCDC_OK && (b == NULL || b->rows < 1))
        rc = mcdc_error_set(err, MCDC_E_PROTOCOL, "the capture health query returned no row");
    if (rc == MCDC_OK) {
        char t[64];
        int64_t newest = 0, end_local = 0, now_local = 0, now_utc = 0;
        out->visible = true;
        out->has_sessions = cell_i64(b, "newest", &newest) && newest > 0;
        out->latency_seconds = cell(b, "latency", 0, t, sizeof t) ? strtod(t, NULL) : 0;
        if (!cell_i64(b, "error_count", &out->error_count)) out->error_count = 0;
        if (!cell_i64(b, "failed_sessions", &out->failed_sessions)) out->failed_sessions = 0;
        if (!cell_i64(b, "transactions", &out->transactions)) out->transactions = 0;
        if (!cell_i64(b, "empty_scans", &out->empty_scans)) out->empty_scans = 0;
        if (!cell_i64(b, "errors_listed", &out->errors_listed)) out->errors_listed = 0;
        out->has_last_scan_end = out->has_sessions && cell_ts(b, "last_end", &end_local) &&
                                 cell_ts(b, "now_local", &now_local) &&
                                 cell_ts(b, "now_utc", &now_utc);
        /* zones are whole minutes from UTC: the two clocks read a moment
         * apart give the offset rounded, and the end reads the same each poll */
        int64_t minute = 60 * 1000000LL, off = now_utc - now_local;
        off = (off >= 0 ? off + minute / 2 : off - minute / 2) / minute * minute;
        out->last_scan_end_us = out->has_last_scan_end ? end_local + off : 0;
    }
    mcdc_batch_free(b);
    mcdc_result_free(r);
    return rc == MCDC_OK ? MCDC_OK : mcdc_error_wrap(err, "reading the capture job's sessions");
}

/* Each change table's rows: its clustered index's (index_id 1) row_count
 * over its partitions; the nonclustered indexes of net changes hold the same
 * rows again, so only the heap or clustered one counts. */
static const char CHANGE_ROWS_SQL[] =
    "SELECT ct.capture_instance AS capture_instance, SUM(ps.row_count) AS row_count "
    "FROM cdc.change_tables AS ct JOIN sys.dm_db_partition_stats AS ps "
    "ON ps.object_id = ct.object_id AND ps.index_id IN (0, 1) "
    "GROUP BY ct.capture_instance ORDER BY ct.capture_instance";

static int change_rows_row(void *ctx, const mcdc_batch *b, int64_t row, mcdc_error *err) {
    mcdc_change_table_rows r;
    memset(&r, 0, sizeof r);
    char t[64];
    if (!cell(b, "capture_instance", row, r.capture_instance, sizeof r.capture_instance) ||
        !cell(b, "row_count", row, t, sizeof t) || mcdc_parse_i64(t, &r.rows) != MCDC_OK ||
        r.rows < 0)
        return mcdc_error_set(err, MCDC_E_PROTOCOL, "a change table's row count is not a count");
    return mcdc_buf_append(ctx, &r, sizeof r, err);
}

int mcdc_cdc_change_table_rows(mcdc_change_table_rows **out, size_t *n, bool *visible,
                               mcdc_cdc_client *c, mcdc_error *err) {
    *out = NULL;
    *n = 0;
    *visible = false;
    mcdc_buf rows = {0};
    mcdc_error why = MCDC_ERROR_INIT;
    int rc = for_each_row(c, CHANGE_ROWS_SQL, NULL, 0, change_rows_row, &rows, &why);
    if (rc == MCDC_E_PERMISSION) { /* no VIEW DATABASE STATE: not visible */
        mcdc_buf_free(&rows);
        return MCDC_OK;
    }
    if (rc != MCDC_OK) {
        mcdc_buf_free(&rows);
        if (err) *err = why;
        return mcdc_error_wrap(err, "reading the change tables' row counts");
    }
    *visible = true;
    *n = rows.len / sizeof **out;
    *out = (mcdc_change_table_rows *)(void *)rows.data; /* mcdc_alloc'd, aligned as malloc's */
    return MCDC_OK;
}

int mcdc_cdc_user_name(char **out, mcdc_cdc_client *c, mcdc_error *err) {
    return mcdc_conn_scalar(out, c->conn, "SELECT USER_NAME()", NULL, 0, err);
}

/* ---- the change-table read ---------------------------------------------------------------- */

/* sql_variant: each base type as text that reads back as the same value.
 * The default conversion does for most; these it would round (float to 6
 * digits, money to 2 places, datetime to minutes) or print as characters
 * (binary): style 3 is float's lossless one (17 digits, SQL Server 2016+),
 * 2 money's four places, 121 and 120 ISO 8601 with all the fraction
 * datetime and smalldatetime have, 1 binary as 0x hex. */
static const struct {
    const char *base, *cast, *style;
} VARIANT_TEXT[] = {
    {"float", "float", "3"},           {"real", "real", "3"},
    {"money", "money", "2"},           {"smallmoney", "smallmoney", "2"},
    {"datetime", "datetime", "121"},   {"smalldatetime", "smalldatetime", "120"},
    {"binary", "varbinary(8000)", "1"}, {"varbinary", "varbinary(8000)", "1"},
};

mcdc_type_id mcdc_cdc_read_type(uint8_t read) {
    switch ((mcdc_sql_read)read) {
    case MCDC_READ_VALUE: break;
    case MCDC_READ_HIERARCHYID:
    case MCDC_READ_VARIANT: return MCDC_TYPE_UTF8;
    case MCDC_READ_SPATIAL: return MCDC_TYPE_BINARY;
    }
    return 0;
}

int mcdc_cdc_column_sql(mcdc_buf *out, const char *alias, const char *name, uint8_t read,
                        mcdc_error *err) {
    mcdc_buf x = {0}; /* alias.[name] */
    int rc = mcdc_buf_printf(&x, err, "%s.", alias);
    if (rc == MCDC_OK) rc = mcdc_sql_quote_ident(&x, name, err);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&x, err);
    const char *v = (const char *)x.data;
    switch ((mcdc_sql_read)read) {
    case MCDC_READ_VALUE:
        if (rc == MCDC_OK) rc = mcdc_buf_append_str(out, v, err);
        break;
    case MCDC_READ_HIERARCHYID: /* ToString(): '/1/2/' */
        if (rc == MCDC_OK) rc = mcdc_buf_printf(out, err, "CAST(%s AS nvarchar(4000))", v);
        break;
    /* The two concatenations below are NULL for a NULL value by the CASE,
     * not by CONCAT_NULL_YIELDS_NULL, which a session may have OFF. */
    case MCDC_READ_SPATIAL:
        /* One varbinary of the SRID and the WKB with Z and M (mcdc_ewkb.h):
         * through hex, as T-SQL's binary + is the one concatenation the
         * simulator lacks. */
        if (rc == MCDC_OK)
            rc = mcdc_buf_printf(out, err,
                                 "CASE WHEN %s IS NULL THEN NULL ELSE CONVERT(varbinary(max), "
                                 "CONVERT(varchar(max), CAST(%s.STSrid AS binary(4)), 2) + "
                                 "CONVERT(varchar(max), %s.AsBinaryZM(), 2), 2) END",
                                 v, v, v);
        break;
    case MCDC_READ_VARIANT: {
        /* "<base type>:<value>" */
        if (rc == MCDC_OK)
            rc = mcdc_buf_printf(out, err,
                                 "CASE WHEN %s IS NULL THEN NULL ELSE CAST(SQL_VARIANT_PROPERTY(%s, "
                                 "'BaseType') AS nvarchar(128)) + N':' + CASE "
                                 "CAST(SQL_VARIANT_PROPERTY(%s, 'BaseType') AS nvarchar(128))",
                                 v, v, v);
        for (size_t i = 0; rc == MCDC_OK && i < sizeof VARIANT_TEXT / sizeof VARIANT_TEXT[0]; i++)
            rc = mcdc_buf_printf(out, err,
                                 " WHEN N'%s' THEN CONVERT(nvarchar(max), CAST(%s AS %s), %s)",
                                 VARIANT_TEXT[i].base, v, VARIANT_TEXT[i].cast,
                                 VARIANT_TEXT[i].style);
        if (rc == MCDC_OK)
            rc = mcdc_buf_printf(out, err, " ELSE CAST(%s AS nvarchar(max)) END END", v);
        break;
    }
    }
    mcdc_buf_free(&x);
    return rc;
}

int mcdc_cdc_changes_sql(mcdc_buf *out, const char *ci, const mcdc_field *cols,
                         const bool *present, const uint8_t *reads, int n_cols,
                         bool include_command_id,
                         const char *commit_time_sql, const mcdc_row_key *after,
                         mcdc_error *err) {
    int rc = mcdc_validate_capture_instance(ci, err);
    if (rc != MCDC_OK) return rc;
    rc = mcdc_buf_append_str(out,
                             "SELECT CONVERT(varchar(22), c.__$start_lsn, 1) AS [_start_lsn], "
                             "CONVERT(varchar(22), c.__$seqval, 1) AS [_seqval], "
                             "c.__$operation AS [_operation], ",
                             err);
    if (rc == MCDC_OK && include_command_id)
        rc = mcdc_buf_append_str(out, "c.__$command_id AS [_command_id], ", err);
    if (rc == MCDC_OK) rc = mcdc_buf_printf(out, err, "%s AS [_commit_ts]", commit_time_sql);
    for (int i = 0; i < n_cols && rc == MCDC_OK; i++) {
        rc = mcdc_buf_append_str(out, ", ", err);
        if (rc != MCDC_OK) break;
        if ((present == NULL || present[i]) && reads && reads[i] != MCDC_READ_VALUE) {
            rc = mcdc_cdc_column_sql(out, "c", cols[i].name, reads[i], err);
            if (rc == MCDC_OK) rc = mcdc_buf_append_str(out, " AS ", err);
            if (rc == MCDC_OK) rc = mcdc_sql_quote_ident(out, cols[i].name, err);
        } else if (present == NULL || present[i]) {
            rc = mcdc_buf_append_str(out, "c.", err);
            if (rc == MCDC_OK) rc = mcdc_sql_quote_ident(out, cols[i].name, err);
        } else {
            char ty[32];
            mcdc_sql_type_cast_name(&cols[i], ty);
            rc = mcdc_buf_printf(out, err, "CAST(NULL AS %s) AS ", ty);
            if (rc == MCDC_OK) rc = mcdc_sql_quote_ident(out, cols[i].name, err);
        }
    }
    if (rc == MCDC_OK)
        rc = mcdc_buf_printf(out, err,
                             " FROM cdc.[%s_CT] AS c INNER JOIN cdc.lsn_time_mapping AS m ON "
                             "m.start_lsn = c.__$start_lsn WHERE c.__$start_lsn BETWEEN "
                             "CONVERT(binary(10), ?, 1) AND CONVERT(binary(10), ?, 1)",
                             ci);
    if (rc == MCDC_OK && after) {
        char l[MCDC_LSN_TEXT_LEN + 1], s[MCDC_LSN_TEXT_LEN + 1];
        mcdc_lsn_format(&after->start_lsn, l);
        mcdc_lsn_format(&after->seqval, s);
        if (include_command_id)
            rc = mcdc_buf_printf(
                out, err,
                " AND (c.__$start_lsn > %s OR (c.__$start_lsn = %s AND (c.__$command_id > %d OR "
                "(c.__$command_id = %d AND (c.__$seqval > %s OR (c.__$seqval = %s AND "
                "c.__$operation > %d))))))",
                l, l, (int)after->command_id, (int)after->command_id, s, s,
                (int)after->operation);
        else
            rc = mcdc_buf_printf(out, err,
                                 " AND (c.__$start_lsn > %s OR (c.__$start_lsn = %s AND "
                                 "(c.__$seqval > %s OR (c.__$seqval = %s AND c.__$operation > "
                                 "%d))))",
                                 l, l, s, s, (int)after->operation);
    }
    if (rc == MCDC_OK)
        rc = mcdc_buf_append_str(out,
                                 include_command_id
                                     ? " ORDER BY c.__$start_lsn, c.__$command_id, c.__$seqval, "
                                       "c.__$operation"
                                     : " ORDER BY c.__$start_lsn, c.__$seqval, c.__$operation",
                                 err);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(out, err);
    return rc;
}


/* ---- the tracked table (snapshots) ------------------------------------------------------ */
static int table_ref(mcdc_buf *out, const char *schema, const char *table, mcdc_error *err) {
    int rc = mcdc_sql_quote_ident(out, schema, err);
    if (rc == MCDC_OK) rc = mcdc_buf_append_byte(out, '.', err);
    if (rc == MCDC_OK) rc = mcdc_sql_quote_ident(out, table, err);
    return rc;
}

/* Before every read of the source table: its isolation level, always named
 * (the session keeps it, and the control connection reads the table under
 * either), and SET LOCK_TIMEOUT (lockTimeoutMs). Never READ UNCOMMITTED: a
 * dirty read can keep a row that a rollback then removes. */
static int source_read_sql(mcdc_buf *out, const mcdc_source_read *rd, mcdc_error *err) {
    int rc = mcdc_buf_printf(out, err, "SET TRANSACTION ISOLATION LEVEL %s; ",
                             rd->snapshot_isolation ? "SNAPSHOT" : "READ COMMITTED");
    if (rc == MCDC_OK && rd->lock_timeout_ms >= 0)
        rc = mcdc_buf_printf(out, err, "SET LOCK_TIMEOUT %lld; ", (long long)rd->lock_timeout_ms);
    return rc;
}

void mcdc_source_read_hint(mcdc_error *err) {
    if (err && err->server_number == 3952)
        mcdc_error_wrap(err, "isolationLevel=snapshot needs ALTER DATABASE ... SET "
                             "ALLOW_SNAPSHOT_ISOLATION ON on the source database (or "
                             "isolationLevel=readCommitted)");
}

/* The key columns as a list: "[a], [b]", with suffix after each (" DESC"). */
static int key_list(mcdc_buf *out, const mcdc_key_col *keys, int n, const char *suffix,
                    mcdc_error *err) {
    int rc = MCDC_OK;
    for (int i = 0; rc == MCDC_OK && i < n; i++) {
        if (i) rc = mcdc_buf_append_str(out, ", ", err);
        if (rc == MCDC_OK) rc = mcdc_sql_quote_ident(out, keys[i].name, err);
        if (rc == MCDC_OK && suffix) rc = mcdc_buf_append_str(out, suffix, err);
    }
    return rc;
}

int mcdc_cdc_snapshot_sql(mcdc_buf *out, mcdc_sql_params *params, const mcdc_snapshot_query *q,
                          mcdc_error *err) {
    MCDC_ASSERT(q->source_schema && q->source_table && q->source_names && q->n_cols >= 0);
    MCDC_ASSERT(q->n_keys >= 0 && (q->n_keys == 0 || q->keys));
    if (q->n_cols == 0)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "a snapshot of %s.%s reads no captured column: name at least one "
                              "in the option columns",
                              q->source_schema, q->source_table);
    mcdc_buf sel = {0};
    int rc = mcdc_buf_append_str(&sel, "SELECT ", err);
    for (int i = 0; i < q->n_cols && rc == MCDC_OK; i++) {
        if (i > 0) rc = mcdc_buf_append_str(&sel, ", ", err);
        if (rc == MCDC_OK && q->source_names[i]) {
            rc = mcdc_cdc_column_sql(&sel, "t", q->source_names[i],
                                     q->reads ? q->reads[i] : (uint8_t)MCDC_READ_VALUE, err);
        } else if (rc == MCDC_OK) {
            char ty[32];
            mcdc_sql_type_cast_name(&q->cols[i], ty);
            rc = mcdc_buf_printf(&sel, err, "CAST(NULL AS %s)", ty);
        }
        if (rc == MCDC_OK) rc = mcdc_buf_append_str(&sel, " AS ", err);
        if (rc == MCDC_OK) rc = mcdc_sql_quote_ident(&sel, q->cols[i].name, err);
    }
    if (rc == MCDC_OK) rc = mcdc_buf_append_str(&sel, " FROM ", err);
    if (rc == MCDC_OK) rc = table_ref(&sel, q->source_schema, q->source_table, err);
    if (rc == MCDC_OK) rc = mcdc_buf_append_str(&sel, " AS t", err);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&sel, err);
    if (rc == MCDC_OK) rc = source_read_sql(out, &q->read, err);
    if (rc == MCDC_OK)
        rc = mcdc_key_select(out, params, (const char *)sel.data, NULL, NULL, q->keys, q->n_keys,
                             q->lo, q->hi, err);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(out, err);
    mcdc_buf_free(&sel);
    return rc;
}

/* One row of a query on the source table: the first row's batch (*b NULL
 * when there is none). */
static int first_row(mcdc_batch **b, mcdc_cdc_client *c, const mcdc_buf *sql,
                     const mcdc_sql_params *p, mcdc_error *err) {
    *b = NULL;
    mcdc_result *r = NULL;
    int rc = mcdc_conn_exec(&r, c->conn, (const char *)sql->data, p ? (const char *const *)p->v : NULL,
                            p ? p->n : 0, err);
    if (rc == MCDC_OK) rc = mcdc_result_next_batch(b, r, 1, err);
    if (rc == MCDC_OK && *b && (*b)->rows == 0) {
        mcdc_batch_free(*b);
        *b = NULL;
    }
    mcdc_result_free(r);
    return rc;
}

/* " WHERE|AND [k] >= from AND [k] < to" for integer bounds (NULL: open). */
static int int_range(mcdc_buf *out, const mcdc_key_col *k, const int64_t *from, const int64_t *to,
                     const char *joiner, mcdc_error *err) {
    int rc = MCDC_OK;
    for (int e = 0; rc == MCDC_OK && e < 2; e++) {
        const int64_t *v = e ? to : from;
        if (v == NULL) continue;
        rc = mcdc_buf_printf(out, err, " %s ", joiner);
        joiner = "AND";
        if (rc == MCDC_OK) rc = mcdc_sql_quote_ident(out, k->name, err);
        if (rc == MCDC_OK) rc = mcdc_buf_printf(out, err, " %s %lld", e ? "<" : ">=", (long long)*v);
    }
    return rc;
}

int mcdc_cdc_key_min_max(json_t **lo, json_t **hi, mcdc_cdc_client *c, const char *source_schema,
                         const char *source_table, const mcdc_key_col *k, const int64_t *from,
                         const int64_t *to, const mcdc_source_read *rd, mcdc_error *err) {
    *lo = *hi = NULL;
    MCDC_ASSERT((from == NULL && to == NULL) || k->kind == MCDC_KEY_INT);
    mcdc_buf sql = {0}, from_t = {0};
    int rc = table_ref(&from_t, source_schema, source_table, err);
    if (rc == MCDC_OK) rc = int_range(&from_t, k, from, to, "WHERE", err);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&from_t, err);
    if (rc == MCDC_OK) rc = source_read_sql(&sql, rd, err);
    /* Two scalar subqueries: each is one seek on an index led by the key. */
    for (int e = 0; rc == MCDC_OK && e < 2; e++) {
        rc = mcdc_buf_append_str(&sql, e ? ", (SELECT MAX(" : "SELECT (SELECT MIN(", err);
        if (rc == MCDC_OK) rc = mcdc_sql_quote_ident(&sql, k->name, err);
        if (rc == MCDC_OK)
            rc = mcdc_buf_printf(&sql, err, ") FROM %s) AS %s", (const char *)from_t.data,
                                 e ? "hi" : "lo");
    }
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&sql, err);
    mcdc_batch *b = NULL;
    if (rc == MCDC_OK) rc = first_row(&b, c, &sql, NULL, err);
    if (rc == MCDC_OK && (b == NULL || b->schema->n_fields != 2))
        rc = mcdc_error_set(err, MCDC_E_PROTOCOL, "MIN/MAX of a key: no row of two columns");
    if (rc == MCDC_OK) rc = mcdc_key_bound_of_row(lo, b, 0, 0, k, 1, err);
    if (rc == MCDC_OK) rc = mcdc_key_bound_of_row(hi, b, 0, 1, k, 1, err);
    if (rc == MCDC_OK && json_is_null(*lo) != json_is_null(*hi))
        rc = mcdc_error_set(err, MCDC_E_PROTOCOL, "MIN/MAX of a key: one is NULL, not both");
    if (rc == MCDC_OK && json_is_null(*lo)) {
        json_decref(*lo);
        json_decref(*hi);
        *lo = *hi = NULL;
    }
    if (rc) {
        json_decref(*lo);
        json_decref(*hi);
        *lo = *hi = NULL;
        mcdc_source_read_hint(err);
        mcdc_error_wrap(err, "reading MIN and MAX of [%s] of %s.%s", k->name, source_schema,
                        source_table);
    }
    mcdc_batch_free(b);
    mcdc_buf_free(&sql);
    mcdc_buf_free(&from_t);
    return rc;
}

typedef struct {
    mcdc_key_slice *v;
    int n, cap;
} slice_acc;

static int slice_row(void *ctx, const mcdc_batch *b, int64_t row, mcdc_error *err) {
    slice_acc *a = ctx;
    char i[32], n[32];
    mcdc_key_slice s;
    if (!cell(b, "b", row, i, sizeof i) || !cell(b, "n", row, n, sizeof n) ||
        mcdc_parse_i64(i, &s.index) != MCDC_OK || mcdc_parse_i64(n, &s.rows) != MCDC_OK ||
        s.rows < 1)
        return mcdc_error_set(err, MCDC_E_PROTOCOL, "counting a key's slices: a malformed row");
    /* The grid's slices, and one more: it is aligned at 0, not at the
     * range's start. */
    if (a->n > MCDC_KEY_SLICES_MAX)
        return mcdc_error_set(err, MCDC_E_PROTOCOL, "counting a key's slices: more than %d",
                              MCDC_KEY_SLICES_MAX + 1);
    if (a->n == a->cap) {
        int cap = a->cap ? a->cap * 2 : 64;
        mcdc_key_slice *v = mcdc_realloc(a->v, sizeof *v * (size_t)cap);
        if (v == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = s;
    return MCDC_OK;
}

static int by_slice(const void *x, const void *y) {
    const mcdc_key_slice *a = x, *b = y;
    return (a->index > b->index) - (a->index < b->index);
}

int mcdc_cdc_key_slices(mcdc_key_slice **out, int *out_n, mcdc_cdc_client *c,
                        const char *source_schema, const char *source_table, const mcdc_key_col *k,
                        int64_t width, const int64_t *from, const int64_t *to,
                        const mcdc_source_read *rd, mcdc_error *err) {
    MCDC_ASSERT(k->kind == MCDC_KEY_INT && width >= 1);
    *out = NULL;
    *out_n = 0;
    mcdc_buf sql = {0}, key = {0};
    int rc = mcdc_sql_quote_ident(&key, k->name, err);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&key, err);
    const char *kk = (const char *)key.data;
    /* T-SQL's integer division truncates toward zero: the CASE floors a
     * negative key, so slice i is [i * width, (i + 1) * width). The __$
     * name is CDC's own prefix: no column of the table can shadow it. */
    if (rc == MCDC_OK) rc = source_read_sql(&sql, rd, err);
    if (rc == MCDC_OK)
        rc = mcdc_buf_printf(&sql, err,
                             "SELECT [__$b] AS b, COUNT_BIG(*) AS n FROM (SELECT CASE WHEN "
                             "CAST(%s AS bigint) >= 0 THEN CAST(%s AS bigint) / CAST(%lld AS "
                             "bigint) ELSE (CAST(%s AS bigint) + 1) / CAST(%lld AS bigint) - 1 "
                             "END AS [__$b] FROM ",
                             kk, kk, (long long)width, kk, (long long)width);
    if (rc == MCDC_OK) rc = table_ref(&sql, source_schema, source_table, err);
    if (rc == MCDC_OK) rc = mcdc_buf_printf(&sql, err, " WHERE %s IS NOT NULL", kk);
    if (rc == MCDC_OK) rc = int_range(&sql, k, from, to, "AND", err);
    if (rc == MCDC_OK) rc = mcdc_buf_append_str(&sql, ") AS x GROUP BY [__$b]", err);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&sql, err);
    slice_acc a = {0};
    if (rc == MCDC_OK) rc = for_each_row(c, (const char *)sql.data, NULL, 0, slice_row, &a, err);
    mcdc_buf_free(&sql);
    mcdc_buf_free(&key);
    if (rc) {
        mcdc_free(a.v);
        mcdc_source_read_hint(err);
        mcdc_error_wrap(err, "counting the rows of %s.%s per slice of [%s]", source_schema,
                        source_table, k->name);
        return rc;
    }
    if (a.n > 1) qsort(a.v, (size_t)a.n, sizeof *a.v, by_slice);
    *out = a.v;
    *out_n = a.n;
    return MCDC_OK;
}

int mcdc_cdc_row_estimate(int64_t *rows, mcdc_cdc_client *c, const char *source_schema,
                          const char *source_table, mcdc_error *err) {
    *rows = 0;
    mcdc_buf name = {0};
    int rc = table_ref(&name, source_schema, source_table, err);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&name, err);
    const char *p[] = {(const char *)name.data};
    mcdc_batch *b = NULL;
    mcdc_result *r = NULL;
    /* sys.sp_spaceused: public, and a lookup of the partitions' row counts,
     * not a scan. */
    if (rc == MCDC_OK) rc = mcdc_conn_exec(&r, c->conn, "EXEC sys.sp_spaceused @objname = ?", p, 1, err);
    if (rc == MCDC_OK) rc = mcdc_result_next_batch(&b, r, 1, err);
    char t[64];
    if (rc == MCDC_OK && b && b->rows > 0 && cell(b, "rows", 0, t, sizeof t)) {
        char *s = t, *e = t + strlen(t);
        while (*s == ' ') s++;
        while (e > s && e[-1] == ' ') *--e = 0;
        if (mcdc_parse_i64(s, rows) != MCDC_OK || *rows < 0)
            rc = mcdc_error_set(err, MCDC_E_PROTOCOL, "sp_spaceused: rows is '%s'", t);
    }
    mcdc_batch_free(b);
    mcdc_result_free(r);
    mcdc_buf_free(&name);
    if (rc) mcdc_error_wrap(err, "estimating the rows of %s.%s", source_schema, source_table);
    return rc;
}

int mcdc_cdc_key_max(json_t **out, mcdc_cdc_client *c, const char *source_schema,
                     const char *source_table, const mcdc_key_col *keys, int n,
                     const mcdc_source_read *rd, mcdc_error *err) {
    MCDC_ASSERT(n >= 1);
    *out = NULL;
    mcdc_buf sql = {0};
    int rc = source_read_sql(&sql, rd, err);
    if (rc == MCDC_OK) rc = mcdc_buf_append_str(&sql, "SELECT TOP (1) ", err);
    if (rc == MCDC_OK) rc = key_list(&sql, keys, n, NULL, err);
    if (rc == MCDC_OK) rc = mcdc_buf_append_str(&sql, " FROM ", err);
    if (rc == MCDC_OK) rc = table_ref(&sql, source_schema, source_table, err);
    if (rc == MCDC_OK) rc = mcdc_buf_append_str(&sql, " ORDER BY ", err);
    if (rc == MCDC_OK) rc = key_list(&sql, keys, n, " DESC", err);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&sql, err);
    mcdc_batch *b = NULL;
    if (rc == MCDC_OK) rc = first_row(&b, c, &sql, NULL, err);
    if (rc == MCDC_OK && b && b->schema->n_fields != n)
        rc = mcdc_error_set(err, MCDC_E_PROTOCOL, "the largest key: %d columns, not %d",
                            (int)b->schema->n_fields, n);
    if (rc == MCDC_OK && b) rc = mcdc_key_bound_of_row(out, b, 0, 0, keys, n, err);
    mcdc_batch_free(b);
    mcdc_buf_free(&sql);
    if (rc) {
        mcdc_source_read_hint(err);
        mcdc_error_wrap(err, "reading the largest key of %s.%s", source_schema, source_table);
    }
    return rc;
}

int mcdc_cdc_key_bound(json_t **out, mcdc_cdc_client *c, const char *source_schema,
                       const char *source_table, const mcdc_key_col *keys, int n, const json_t *lo,
                       const json_t *hi, int64_t skip, const mcdc_source_read *rd,
                       mcdc_error *err) {
    MCDC_ASSERT(n >= 1 && skip >= 0 && skip < INT64_MAX);
    *out = NULL;
    mcdc_buf sql = {0}, list = {0}, sel = {0}, close = {0};
    mcdc_sql_params p = {0};
    int rc = key_list(&list, keys, n, NULL, err);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&list, err);
    const char *k = (const char *)list.data;
    /* Each seekable piece of [lo, hi) takes its first skip + 1 keys (TOP
     * ends its seek there) and the (skip + 1)-th of their union is the
     * bound: a few times skip keys read, never the range itself. */
    if (rc == MCDC_OK) rc = mcdc_buf_printf(&sel, err, "SELECT TOP (%lld) %s FROM ", (long long)skip + 1, k);
    if (rc == MCDC_OK) rc = table_ref(&sel, source_schema, source_table, err);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&sel, err);
    if (rc == MCDC_OK) rc = mcdc_buf_printf(&close, err, " ORDER BY %s) AS p", k);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&close, err);
    if (rc == MCDC_OK) rc = source_read_sql(&sql, rd, err);
    if (rc == MCDC_OK) rc = mcdc_buf_printf(&sql, err, "SELECT %s FROM (", k);
    if (rc == MCDC_OK)
        rc = mcdc_key_select(&sql, &p, (const char *)sel.data, "SELECT * FROM (",
                             (const char *)close.data, keys, n, lo, hi, err);
    if (rc == MCDC_OK)
        rc = mcdc_buf_printf(&sql, err, ") AS u ORDER BY %s OFFSET %lld ROWS FETCH NEXT 1 ROWS ONLY",
                             k, (long long)skip);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&sql, err);
    mcdc_batch *b = NULL;
    if (rc == MCDC_OK) rc = first_row(&b, c, &sql, &p, err);
    if (rc == MCDC_OK && b && b->schema->n_fields != n)
        rc = mcdc_error_set(err, MCDC_E_PROTOCOL, "a key bound: %d columns, not %d",
                            (int)b->schema->n_fields, n);
    if (rc == MCDC_OK && b) rc = mcdc_key_bound_of_row(out, b, 0, 0, keys, n, err);
    mcdc_batch_free(b);
    mcdc_sql_params_free(&p);
    mcdc_buf_free(&sql);
    mcdc_buf_free(&list);
    mcdc_buf_free(&sel);
    mcdc_buf_free(&close);
    if (rc) {
        mcdc_source_read_hint(err);
        mcdc_error_wrap(err, "seeking a key bound of %s.%s", source_schema, source_table);
    }
    return rc;
}

void mcdc_table_columns_free(mcdc_table_column *v, int n) {
    for (int i = 0; v && i < n; i++) {
        mcdc_free(v[i].name);
        mcdc_free(v[i].collation);
    }
    mcdc_free(v);
}

typedef struct {
    mcdc_table_column *v;
    int n, cap;
} tcols_acc;

static int tcol_row(void *ctx, const mcdc_batch *b, int64_t row, mcdc_error *err) {
    tcols_acc *a = ctx;
    char name[MCDC_IDENT_BYTES_MAX + 1], id[32], coll[MCDC_IDENT_BYTES_MAX + 1];
    int64_t v;
    if (!cell(b, "name", row, name, sizeof name) || !cell(b, "column_id", row, id, sizeof id) ||
        mcdc_parse_i64(id, &v) != MCDC_OK || v < 0 || v > INT32_MAX)
        return mcdc_error_set(err, MCDC_E_PROTOCOL, "sys.columns: a row without name or column_id");
    bool has_coll = cell(b, "collation_name", row, coll, sizeof coll);
    char comp[8] = "0";
    cell(b, "is_computed", row, comp, sizeof comp);
    if (a->n == a->cap) {
        if (a->cap >= MCDC_COLUMNS_MAX * 2)
            return mcdc_error_set(err, MCDC_E_LIMIT, "sys.columns: more than %d columns",
                                  MCDC_COLUMNS_MAX * 2);
        int cap = a->cap ? a->cap * 2 : 16;
        mcdc_table_column *nv = mcdc_realloc(a->v, sizeof *nv * (size_t)cap);
        if (nv == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        a->v = nv;
        a->cap = cap;
    }
    mcdc_table_column *t = &a->v[a->n];
    t->column_id = (int)v;
    t->name = mcdc_strdup(name);
    t->collation = has_coll ? mcdc_strdup(coll) : NULL;
    t->computed = comp[0] == '1' || comp[0] == 't' || comp[0] == 'T';
    if (t->name == NULL || (has_coll && t->collation == NULL)) {
        mcdc_free(t->name);
        mcdc_free(t->collation);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    a->n++;
    return MCDC_OK;
}

int mcdc_cdc_table_columns(mcdc_table_column **out, int *out_n, mcdc_cdc_client *c,
                           const char *source_schema, const char *source_table, mcdc_error *err) {
    *out = NULL;
    *out_n = 0;
    tcols_acc a = {0};
    const char *p[] = {source_schema, source_table};
    int rc = for_each_row(c,
                          "SELECT name, column_id, collation_name, is_computed FROM sys.columns WHERE "
                          "object_id = OBJECT_ID(QUOTENAME(?) + '.' + QUOTENAME(?))",
                          p, 2, tcol_row, &a, err);
    if (rc) {
        mcdc_table_columns_free(a.v, a.n);
        mcdc_error_wrap(err, "reading the columns of %s.%s", source_schema, source_table);
        return rc;
    }
    *out = a.v;
    *out_n = a.n;
    return MCDC_OK;
}

/* ---- reconcile's counts (reference §3.1 row 20) ------------------------------------------ */
/* The key's ordinal: the integer as bigint, a date's day number from
 * 1970-01-01. */
static int ordinal_sql(mcdc_buf *out, const mcdc_key_col *k, const char *of, mcdc_error *err) {
    if (k->kind == MCDC_KEY_INT) return mcdc_buf_printf(out, err, "CAST(%s AS bigint)", of);
    return mcdc_buf_printf(out, err, "CAST(DATEDIFF(day, CAST('19700101' AS date), %s) AS bigint)",
                           of);
}

static bool ordinal_key(const mcdc_key_col *k) {
    return k->kind == MCDC_KEY_INT || (k->kind == MCDC_KEY_CAST && strcmp(k->type, "date") == 0);
}

/* A count or a sum cell: an integer, a decimal(p,0) or its digits. */
static bool wide_cell(const mcdc_batch *b, int col, int64_t row, mcdc_wide *out) {
    const mcdc_column *c = &b->columns[col];
    if (!mcdc_col_is_valid(c, row)) return false;
    switch (c->field->type) {
    case MCDC_TYPE_INT64: {
        int64_t v;
        memcpy(&v, c->values + row * 8, 8);
        out->lo = (uint64_t)v;
        out->hi = v < 0 ? -1 : 0;
        return true;
    }
    case MCDC_TYPE_INT32: {
        int32_t v;
        memcpy(&v, c->values + row * 4, 4);
        out->lo = (uint64_t)(int64_t)v;
        out->hi = v < 0 ? -1 : 0;
        return true;
    }
    case MCDC_TYPE_DECIMAL:
        if (c->field->scale != 0) return false;
        memcpy(&out->lo, c->values + row * 16, 8);
        memcpy(&out->hi, c->values + row * 16 + 8, 8);
        return true;
    default:
        return false;
    }
}

int mcdc_cdc_key_ordinal_extent(bool *found, int64_t *lo, int64_t *hi, mcdc_cdc_client *c,
                                const char *source_schema, const char *source_table,
                                const mcdc_key_col *k, const mcdc_source_read *rd,
                                mcdc_error *err) {
    *found = false;
    *lo = *hi = 0;
    if (!ordinal_key(k))
        return mcdc_error_set(err, MCDC_E_INVALID, "[%s] (%s) has no ordinal: not an integer or a date",
                              k->name, k->type);
    mcdc_buf sql = {0}, key = {0}, t = {0};
    int rc = mcdc_sql_quote_ident(&key, k->name, err);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&key, err);
    if (rc == MCDC_OK) rc = table_ref(&t, source_schema, source_table, err);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&t, err);
    if (rc == MCDC_OK) rc = source_read_sql(&sql, rd, err);
    /* MIN and MAX of the column itself (two seeks), made ordinals after */
    for (int e = 0; rc == MCDC_OK && e < 2; e++) {
        char of[3 * MCDC_IDENT_BYTES_MAX + 64];
        snprintf(of, sizeof of, "(SELECT %s(%s) FROM %s)", e ? "MAX" : "MIN", (const char *)key.data,
                 (const char *)t.data);
        rc = mcdc_buf_append_str(&sql, e ? ", " : "SELECT ", err);
        if (rc == MCDC_OK) rc = ordinal_sql(&sql, k, of, err);
        if (rc == MCDC_OK) rc = mcdc_buf_append_str(&sql, e ? " AS hi" : " AS lo", err);
    }
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&sql, err);
    mcdc_batch *b = NULL;
    if (rc == MCDC_OK) rc = first_row(&b, c, &sql, NULL, err);
    mcdc_wide a, z;
    if (rc == MCDC_OK && (b == NULL || b->schema->n_fields != 2))
        rc = mcdc_error_set(err, MCDC_E_PROTOCOL, "MIN/MAX of a key's ordinal: no row of two columns");
    if (rc == MCDC_OK) {
        bool ha = wide_cell(b, 0, 0, &a), hz = wide_cell(b, 1, 0, &z);
        if (ha != hz || (ha && (a.hi != ((int64_t)a.lo < 0 ? -1 : 0) || z.hi != ((int64_t)z.lo < 0 ? -1 : 0))))
            rc = mcdc_error_set(err, MCDC_E_PROTOCOL, "MIN/MAX of a key's ordinal: not two bigints");
        else if (ha) {
            *found = true;
            *lo = (int64_t)a.lo;
            *hi = (int64_t)z.lo;
        }
    }
    mcdc_batch_free(b);
    mcdc_buf_free(&sql);
    mcdc_buf_free(&key);
    mcdc_buf_free(&t);
    if (rc) {
        mcdc_source_read_hint(err);
        mcdc_error_wrap(err, "reading MIN and MAX of [%s] of %s.%s", k->name, source_schema,
                        source_table);
    }
    return rc;
}

typedef struct {
    mcdc_key_bucket *v;
    int n, cap, max;
} bucket_acc;

static int bucket_row(void *ctx, const mcdc_batch *b, int64_t row, mcdc_error *err) {
    bucket_acc *a = ctx;
    mcdc_key_bucket k;
    mcdc_wide ix, n;
    if (b->schema->n_fields != 3 || !wide_cell(b, 0, row, &ix) || !wide_cell(b, 1, row, &n) ||
        !wide_cell(b, 2, row, &k.sum) || n.hi != 0 || (int64_t)n.lo < 1 ||
        ix.hi != ((int64_t)ix.lo < 0 ? -1 : 0))
        return mcdc_error_set(err, MCDC_E_PROTOCOL, "counting a key's buckets: a malformed row");
    k.index = (int64_t)ix.lo;
    k.rows = (int64_t)n.lo;
    if (a->n >= a->max)
        return mcdc_error_set(err, MCDC_E_PROTOCOL, "counting a key's buckets: more than %d", a->max);
    if (a->n == a->cap) {
        int cap = a->cap ? a->cap * 2 : 64;
        mcdc_key_bucket *v = mcdc_realloc(a->v, sizeof *v * (size_t)cap);
        if (v == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = k;
    return MCDC_OK;
}

static int by_bucket(const void *x, const void *y) {
    const mcdc_key_bucket *a = x, *b = y;
    return (a->index > b->index) - (a->index < b->index);
}

int mcdc_cdc_key_buckets(mcdc_key_bucket **out, int *out_n, mcdc_cdc_client *c,
                         const char *source_schema, const char *source_table, const mcdc_key_col *k,
                         int64_t width, int max_buckets, const mcdc_source_read *rd,
                         mcdc_error *err) {
    MCDC_ASSERT(width >= 1 && max_buckets >= 1);
    *out = NULL;
    *out_n = 0;
    if (!ordinal_key(k))
        return mcdc_error_set(err, MCDC_E_INVALID, "[%s] (%s) has no ordinal: not an integer or a date",
                              k->name, k->type);
    mcdc_buf sql = {0}, key = {0}, o = {0};
    int rc = mcdc_sql_quote_ident(&key, k->name, err);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&key, err);
    if (rc == MCDC_OK) rc = ordinal_sql(&o, k, (const char *)key.data, err);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&o, err);
    const char *ord = (const char *)o.data;
    /* One scan: per row its ordinal and its bucket (floored for negative
     * ordinals, as integer division truncates), then per bucket the rows
     * and the ordinals' sum as decimal(38,0), which no bigint key range
     * overflows. The __$ names are CDC's prefix: no column shadows them. */
    if (rc == MCDC_OK) rc = source_read_sql(&sql, rd, err);
    if (rc == MCDC_OK)
        rc = mcdc_buf_printf(&sql, err,
                             "SELECT [__$b] AS b, COUNT_BIG(*) AS n, SUM(CAST([__$o] AS "
                             "decimal(38,0))) AS s FROM (SELECT %s AS [__$o], CASE WHEN %s >= 0 "
                             "THEN %s / CAST(%lld AS bigint) ELSE (%s + 1) / CAST(%lld AS bigint) - "
                             "1 END AS [__$b] FROM ",
                             ord, ord, ord, (long long)width, ord, (long long)width);
    if (rc == MCDC_OK) rc = table_ref(&sql, source_schema, source_table, err);
    if (rc == MCDC_OK)
        rc = mcdc_buf_printf(&sql, err, " WHERE %s IS NOT NULL) x GROUP BY [__$b]",
                             (const char *)key.data);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&sql, err);
    bucket_acc a = {.max = max_buckets};
    if (rc == MCDC_OK) rc = for_each_row(c, (const char *)sql.data, NULL, 0, bucket_row, &a, err);
    mcdc_buf_free(&sql);
    mcdc_buf_free(&key);
    mcdc_buf_free(&o);
    if (rc) {
        mcdc_free(a.v);
        mcdc_source_read_hint(err);
        mcdc_error_wrap(err, "counting the rows of %s.%s per bucket of [%s]", source_schema,
                        source_table, k->name);
        return rc;
    }
    if (a.n > 1) qsort(a.v, (size_t)a.n, sizeof *a.v, by_bucket);
    *out = a.v;
    *out_n = a.n;
    return MCDC_OK;
}

int mcdc_cdc_row_count(int64_t *rows, mcdc_cdc_client *c, const char *source_schema,
                       const char *source_table, const mcdc_source_read *rd, mcdc_error *err) {
    *rows = 0;
    mcdc_buf sql = {0};
    int rc = source_read_sql(&sql, rd, err);
    if (rc == MCDC_OK) rc = mcdc_buf_append_str(&sql, "SELECT COUNT_BIG(*) AS n FROM ", err);
    if (rc == MCDC_OK) rc = table_ref(&sql, source_schema, source_table, err);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&sql, err);
    mcdc_batch *b = NULL;
    if (rc == MCDC_OK) rc = first_row(&b, c, &sql, NULL, err);
    mcdc_wide n;
    if (rc == MCDC_OK && (b == NULL || b->schema->n_fields != 1 || !wide_cell(b, 0, 0, &n) ||
                          n.hi != 0 || (int64_t)n.lo < 0))
        rc = mcdc_error_set(err, MCDC_E_PROTOCOL, "COUNT_BIG(*): not one count");
    if (rc == MCDC_OK) *rows = (int64_t)n.lo;
    mcdc_batch_free(b);
    mcdc_buf_free(&sql);
    if (rc) {
        mcdc_source_read_hint(err);
        mcdc_error_wrap(err, "counting the rows of %s.%s", source_schema, source_table);
    }
    return rc;
}

/* ---- the probe of many capture instances ------------------------------------- */
typedef struct {
    mcdc_probe_item *items;
    int n;
    mcdc_probe_item **by_ci; /* the items in the order of their names (NULL: look in turn) */
} probe_acc;

static mcdc_probe_item *probe_find(probe_acc *a, const char *ci) {
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->items[i].ci, ci) == 0) return &a->items[i];
    return NULL;
}

static int by_ci_cmp(const void *x, const void *y) {
    return strcmp((*(mcdc_probe_item *const *)x)->ci, (*(mcdc_probe_item *const *)y)->ci);
}

static int min_row(void *ctx, const mcdc_batch *b, int64_t row, mcdc_error *err) {
    probe_acc *a = ctx;
    char ci[MCDC_IDENT_BYTES_MAX + 1], lsn[64];
    if (!cell(b, "capture_instance", row, ci, sizeof ci) || !cell(b, "start_lsn", row, lsn, sizeof lsn))
        return MCDC_OK;
    /* a row per instance of the database, an item per stream: by name, not
     * each row against every item (n rows times n items a round) */
    int lo = 0, hi = a->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (strcmp(a->by_ci[mid]->ci, ci) < 0) lo = mid + 1;
        else hi = mid;
    }
    if (lo == a->n || strcmp(a->by_ci[lo]->ci, ci) != 0) return MCDC_OK;
    mcdc_lsn min;
    if (mcdc_lsn_parse_cstr(&min, lsn, NULL) != MCDC_OK)
        return mcdc_error_set(err, MCDC_E_PROTOCOL, "the server's start_lsn of %s is not an LSN",
                              ci);
    for (int i = lo; i < a->n && strcmp(a->by_ci[i]->ci, ci) == 0; i++) {
        a->by_ci[i]->min_lsn = min; /* every stream of that instance */
        a->by_ci[i]->has_min = true;
    }
    return MCDC_OK;
}

int mcdc_cdc_probe_min_lsns(mcdc_cdc_client *c, mcdc_probe_item *items, int n,
                            const mcdc_lsn *above, mcdc_error *err) {
    for (int i = 0; i < n; i++) items[i].has_min = false;
    probe_acc a = {items, n, mcdc_calloc((size_t)n + 1, sizeof(mcdc_probe_item *))};
    if (a.by_ci == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    bool sorted = true; /* as the runtime's probe gives them */
    for (int i = 0; i < n; i++) {
        a.by_ci[i] = &items[i];
        sorted = sorted && (i == 0 || strcmp(items[i - 1].ci, items[i].ci) <= 0);
    }
    if (!sorted) qsort(a.by_ci, (size_t)n, sizeof *a.by_ci, by_ci_cmp);
    char hex[MCDC_LSN_TEXT_LEN + 1];
    const char *p[1] = {hex};
    if (above) mcdc_lsn_format(above, hex);
    /* the bound leaves out every instance whose start_lsn no position is
     * behind: the rows of an idle database, whose cleanup keeps days */
    int rc = for_each_row(c,
                          above ? "SELECT t.capture_instance, CONVERT(varchar(22), t.start_lsn, 1) "
                                  "AS start_lsn FROM cdc.change_tables AS t WHERE t.start_lsn > "
                                  "CONVERT(binary(10), ?, 1)"
                                : "SELECT t.capture_instance, CONVERT(varchar(22), t.start_lsn, 1) "
                                  "AS start_lsn FROM cdc.change_tables AS t",
                          above ? p : NULL, above ? 1 : 0, min_row, &a, err);
    mcdc_free(a.by_ci);
    return rc ? mcdc_error_wrap(err, "reading the capture instances' min_lsn") : MCDC_OK;
}

static int moved_row(void *ctx, const mcdc_batch *b, int64_t row, mcdc_error *err) {
    (void)err;
    char ci[MCDC_IDENT_BYTES_MAX + 1];
    if (!cell(b, "ci", row, ci, sizeof ci)) return MCDC_OK;
    mcdc_probe_item *it = probe_find(ctx, ci);
    if (it) it->moved = true;
    return MCDC_OK;
}

/* One query's UNION ALL over the asked instances behind max in
 * items[*next..n): one branch each, its name (a parameter, so any name is a
 * literal) when its change table has a row past its position. TOP (1) lets
 * the server stop at the first row of the clustered index (__$start_lsn
 * leads it); the table name is bracketed, ] doubled. At most
 * MCDC_PROBE_BRANCHES_MAX branches; *next is left at the first item not
 * taken, *branches says how many were. */
static int probe_chunk(mcdc_buf *sql, const char **p, int *np, char (*hex)[MCDC_LSN_TEXT_LEN + 1],
                       mcdc_probe_item *items, int n, const mcdc_lsn *max, int *next,
                       int *branches, mcdc_error *err) {
    int rc = MCDC_OK, i = *next;
    *np = 0;
    *branches = 0;
    for (; i < n && *branches < MCDC_PROBE_BRANCHES_MAX && rc == MCDC_OK; i++) {
        items[i].moved = false;
        if (!items[i].ask || mcdc_lsn_cmp(&items[i].from, max) >= 0) continue;
        mcdc_lsn_format(&items[i].from, hex[i]);
        if ((*branches)++) rc = mcdc_buf_append_str(sql, " UNION ALL ", err);
        if (rc == MCDC_OK)
            rc = mcdc_buf_printf(sql, err, "SELECT p%d.ci FROM (SELECT TOP (1) CONVERT(nvarchar(%d), ?) "
                                           "AS ci FROM cdc.[", i, MCDC_SYSNAME_CHARS_MAX);
        for (const char *q = items[i].ci; *q && rc == MCDC_OK; q++)
            rc = *q == ']' ? mcdc_buf_append_str(sql, "]]", err) : mcdc_buf_append_byte(sql, (uint8_t)*q, err);
        if (rc == MCDC_OK)
            rc = mcdc_buf_printf(sql, err, "_CT] WHERE __$start_lsn > CONVERT(binary(10), ?, 1) AND "
                                           "__$start_lsn <= CONVERT(binary(10), ?, 1)) AS p%d", i);
        p[(*np)++] = items[i].ci;
        p[(*np)++] = hex[i];
        p[(*np)++] = hex[n];
    }
    *next = i;
    if (rc == MCDC_OK && *branches > 0) rc = mcdc_buf_cstr(sql, err);
    return rc;
}

int mcdc_cdc_probe_moved(mcdc_cdc_client *c, mcdc_probe_item *items, int n, const mcdc_lsn *max,
                         int *queries, mcdc_error *err) {
    mcdc_buf sql = {0};
    const char **p = mcdc_calloc((size_t)MCDC_PROBE_BRANCHES_MAX * 3, sizeof *p);
    char(*hex)[MCDC_LSN_TEXT_LEN + 1] = mcdc_calloc((size_t)n + 1, sizeof *hex);
    int rc = p && hex ? MCDC_OK : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    if (rc == MCDC_OK) mcdc_lsn_format(max, hex[n]);
    probe_acc a = {items, n, NULL};
    for (int next = 0; next < n && rc == MCDC_OK;) {
        int np = 0, branches = 0;
        mcdc_buf_reset(&sql);
        rc = probe_chunk(&sql, p, &np, hex, items, n, max, &next, &branches, err);
        if (rc != MCDC_OK || branches == 0) break;
        (*queries)++;
        rc = for_each_row(c, (const char *)sql.data, p, np, moved_row, &a, err);
        if (rc) mcdc_error_wrap(err, "asking which of %d change tables have new rows", branches);
    }
    mcdc_buf_free(&sql);
    mcdc_free(p);
    mcdc_free(hex);
    return rc;
}
