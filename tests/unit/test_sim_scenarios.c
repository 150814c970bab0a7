/* test_sim_scenarios.c - runs scenarios/<name>.sql against the engine and
 * compares every result set with scenarios/<name>.expected (see
 * scenarios/README.md for the format). */
#include <ctype.h>

#include "test_sim_helpers.h"

typedef struct scen_out { mcdc_buf b; } scen_out;

static int so_cols(void *ctx, const sim_column *c, int n) {
    (void)c; (void)n;
    mcdc_buf_append_str(&((scen_out *)ctx)->b, "---\n", NULL);
    return 0;
}
static int so_row(void *ctx, const sim_value *v, int n) {
    mcdc_buf *b = &((scen_out *)ctx)->b;
    for (int k = 0; k < n; k++) {
        if (k) mcdc_buf_append_byte(b, '|', NULL);
        switch (v[k].kind) {
        case SIM_V_NULL: mcdc_buf_append_str(b, "NULL", NULL); break;
        case SIM_V_INT: mcdc_buf_printf(b, NULL, "%lld", (long long)v[k].i); break;
        case SIM_V_REAL: mcdc_buf_printf(b, NULL, "%g", v[k].f); break;
        case SIM_V_TEXT: mcdc_buf_append(b, v[k].p, v[k].n, NULL); break;
        case SIM_V_BLOB:
            mcdc_buf_append_str(b, "0x", NULL);
            for (size_t i = 0; i < v[k].n; i++) mcdc_buf_printf(b, NULL, "%02X", v[k].p[i]);
            break;
        }
    }
    mcdc_buf_append_byte(b, '\n', NULL);
    return 0;
}
static int so_done(void *c, int64_t r, bool h, bool p, bool e) { (void)c; (void)r; (void)h; (void)p; (void)e; return 0; }
static int so_msg(void *ctx, bool is_error, int number, int state, int cls, const char *text, const char *proc, int line) {
    (void)state; (void)cls; (void)proc;
    if (is_error) mcdc_buf_printf(&((scen_out *)ctx)->b, NULL, "ERROR %d (line %d): %s\n", number, line, text);
    return 0;
}
static int so_db(void *c, const char *a, const char *b) { (void)c; (void)a; (void)b; return 0; }

static char *slurp(const char *name, const char *ext) {
    static const char *dirs[] = {"scenarios", "../scenarios", "../../scenarios"};
    for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s.%s", dirs[d], name, ext);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        mcdc_buf b = {0};
        char chunk[4096];
        size_t n;
        while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) mcdc_buf_append(&b, chunk, n, NULL);
        fclose(f);
        mcdc_buf_cstr(&b, NULL);
        return (char *)b.data;
    }
    return NULL;
}

/* Runs one scenario; returns the produced output (caller frees) or NULL. */
static char *run_scenario(const char *name) {
    char *sql = slurp(name, "sql");
    if (!sql) return NULL;
    char dir[64];
    test_tmpdir(dir, sizeof dir);
    sim_server *srv = test_server(dir, 0);
    sim_session *sess[4] = {0};
    char names[4] = {'A', 0, 0, 0};
    sess[0] = test_login(srv, "sa", "Sa_Passw0rd", NULL);
    int cur = 0;
    scen_out out = {{0}};
    sim_sink sink = {&out, so_cols, so_row, so_done, so_msg, so_db, NULL, NULL, NULL, NULL, NULL};
    mcdc_buf batch = {0};
    char *p = sql;
    while (p && *p) {
        char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line - 1 ? len : sizeof line - 1), p);
        p = nl ? nl + 1 : NULL;
        char *t = line;
        while (isspace((unsigned char)*t)) t++;
        size_t tl = strlen(t);
        while (tl && isspace((unsigned char)t[tl - 1])) t[--tl] = 0;
        if (strstr(t, "-- real only")) continue;
        if (strncmp(t, "-- @session ", 12) == 0) {
            char who = t[12];
            int k = 0;
            while (k < 4 && names[k] && names[k] != who) k++;
            if (k < 4 && !names[k]) { names[k] = who; sess[k] = test_login(srv, "sa", "Sa_Passw0rd", NULL); }
            if (k < 4) cur = k;
            continue;
        }
        if (mcdc_str_ieq(t, "GO")) {
            if (batch.len) sim_exec_batch(sess[cur], (const char *)batch.data, batch.len, &sink);
            mcdc_buf_reset(&batch);
            continue;
        }
        mcdc_buf_append(&batch, line, strlen(line), NULL);
        mcdc_buf_append_byte(&batch, '\n', NULL);
    }
    if (batch.len) sim_exec_batch(sess[cur], (const char *)batch.data, batch.len, &sink);
    mcdc_buf_free(&batch);
    for (int k = 0; k < 4; k++) sim_session_close(sess[k]);
    sim_server_close(srv);
    test_rmdir(dir);
    mcdc_free(sql);
    mcdc_buf_cstr(&out.b, NULL);
    return out.b.data ? (char *)out.b.data : mcdc_strdup("");
}

static void check_scenario(const char *name) {
    char *got = run_scenario(name);
    char *want = slurp(name, "expected");
    CHECK(got != NULL);
    CHECK(want != NULL);
    if (got && want) {
        bool same = strcmp(got, want) == 0;
        if (!same) fprintf(stderr, "scenario %s produced:\n%s\nexpected:\n%s\n", name, got, want);
        CHECK(same);
    }
    mcdc_free(got);
    mcdc_free(want);
}

TEST(sim_scenarios_t1_idle_heartbeat) { check_scenario("t1_idle_heartbeat"); }
TEST(sim_scenarios_t2_timezone) { check_scenario("t2_timezone"); }
TEST(sim_scenarios_t3_read_semantics) { check_scenario("t3_read_semantics"); }
TEST(sim_scenarios_t4_watermark_concurrency) { check_scenario("t4_watermark_concurrency"); }
TEST(sim_scenarios_t5_decimal_ddl_rollback) { check_scenario("t5_decimal_ddl_rollback"); }
TEST(sim_scenarios_t6_read_committed) { check_scenario("t6_read_committed"); }
TEST(sim_scenarios_t7_schema_changes) { check_scenario("t7_schema_changes"); }
TEST(sim_scenarios_t8_switch_capture_instance) { check_scenario("t8_switch_capture_instance"); }
TEST(sim_scenarios_t9_types) { check_scenario("t9_types"); }
TEST(sim_scenarios_t10_snapshot_isolation) { check_scenario("t10_snapshot_isolation"); }
TEST(sim_scenarios_t11_heap_cdc) { check_scenario("t11_heap_cdc"); }
TEST(sim_scenarios_t12_snapshot_reads) { check_scenario("t12_snapshot_reads"); }
