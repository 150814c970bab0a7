/*
 * sim_create_tables.c - EXEC sim.create_tables: many CDC-enabled tables at
 * once for tests and benchmarks of many tables. Each table is
 * [<schema>].[<prefix><n>](id int PRIMARY KEY, v nvarchar(50), n int),
 * created and enabled (sys.sp_cdc_enable_table, no gating role) through the
 * ordinary T-SQL paths in a session of its own, so each is what a client's
 * CREATE TABLE and enable would have made.
 */
#include "sim_engine_int.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* The first error the batch reported. */
typedef struct ct_errs {
    int number;
    char text[512];
} ct_errs;

static int ct_columns(void *c, const sim_column *k, int n) { (void)c; (void)k; (void)n; return 0; }
static int ct_row(void *c, const sim_value *v, int n) { (void)c; (void)v; (void)n; return 0; }
static int ct_done(void *c, int64_t r, bool h, bool p, bool e) { (void)c; (void)r; (void)h; (void)p; (void)e; return 0; }
static int ct_db(void *c, const char *a, const char *b) { (void)c; (void)a; (void)b; return 0; }
static int ct_msg(void *c, bool is_error, int n, int s, int k, const char *t, const char *p, int l) {
    (void)s; (void)k; (void)p; (void)l;
    ct_errs *e = c;
    if (is_error && e->number == 0) {
        e->number = n;
        snprintf(e->text, sizeof e->text, "%s", t ? t : "");
    }
    return 0;
}

/* A name part the T-SQL text may carry as is: letters, digits, '_'. */
static bool plain_name(const char *s, size_t max) {
    size_t n = strlen(s);
    if (n == 0 || n > max) return false;
    for (size_t k = 0; k < n; k++)
        if (!isalnum((unsigned char)s[k]) && s[k] != '_') return false;
    return true;
}

static int64_t arg_int(const sim_proc_args *a, const char *name, int pos, int64_t dflt) {
    sqlite3_value *v = sim_arg(a, name, pos);
    return v && sqlite3_value_type(v) != SQLITE_NULL ? sqlite3_value_int64(v) : dflt;
}

int sim_work_create_tables(sim_session *s, const sim_proc_args *a, mcdc_error *err) {
    int64_t count = arg_int(a, "@count", 0, 0), first = arg_int(a, "@first", 3, 1);
    const char *prefix = sim_arg_text(a, "@prefix", 1), *schema = sim_arg_text(a, "@schema", 2);
    if (!prefix) prefix = "t";
    if (!schema) schema = "dbo";
    if (count < 1 || count > MCDC_SIM_CREATE_TABLES_MAX)
        return sim_err(err, 50000, "sim.create_tables: @count must be 1 to %d (got %lld)", MCDC_SIM_CREATE_TABLES_MAX,
                       (long long)count);
    if (first < 0 || first > 1000000000)
        return sim_err(err, 50000, "sim.create_tables: @first must be 0 to 1000000000 (got %lld)", (long long)first);
    if (!plain_name(prefix, 100) || !plain_name(schema, 100))
        return sim_err(err, 50000, "sim.create_tables: @prefix and @schema take letters, digits and '_' (1 to 100 of them)");
    sim_session *t = NULL;
    int rc = sim_cdc_need_db(s, err);
    if (rc == MCDC_OK) rc = sim_login_trusted(s->srv, &t, "sa", s->db->name, err);
    if (rc != MCDC_OK) return rc;
    ct_errs e = {0, ""};
    sim_sink sink = {&e, ct_columns, ct_row, ct_done, ct_msg, ct_db, NULL, NULL, NULL, NULL, NULL};
    mcdc_buf b = {0};
    for (int64_t k = 0; k < count && rc == MCDC_OK && e.number == 0; k++) {
        mcdc_buf_reset(&b);
        long long n = (long long)(first + k);
        rc = mcdc_buf_printf(&b, err,
                             "CREATE TABLE [%s].[%s%lld](id int NOT NULL PRIMARY KEY, v nvarchar(50) NULL, n int NULL);"
                             " EXEC sys.sp_cdc_enable_table @source_schema = N'%s', @source_name = N'%s%lld',"
                             " @role_name = NULL;",
                             schema, prefix, n, schema, prefix, n);
        if (rc == MCDC_OK) sim_exec_batch(t, (const char *)b.data, b.len, &sink);
    }
    mcdc_buf_free(&b);
    sim_session_close(t);
    if (rc == MCDC_OK && e.number)
        rc = sim_err(err, e.number, "%s", e.text);
    return rc;
}
