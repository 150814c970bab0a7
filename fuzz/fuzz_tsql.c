/*
 * fuzz_tsql.c - libFuzzer target over the T-SQL lexer and translator (its
 * rewrites included), and the recognizers of the base-table fast path's
 * shapes (sim_fast_match_table, sim_fast_match_slices: their select lists
 * and key predicate parser).
 * Build (from the repo root):
 *   clang -std=c17 -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE \
 *     -Iinclude -Isrc/util -Isrc/sim fuzz/fuzz_tsql.c src/sim/tsql_lex.c \
 *     src/sim/tsql_xlate.c src/sim/sim_val.c src/sim/sim_tz.c src/util/mcdc_util.c \
 *     -lsqlite3 -lpthread -lm -o build/fuzz_tsql
 *   build/fuzz_tsql fuzz/corpus/tsql
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sim_engine_int.h"
#include "tsql_lex.h"
#include "tsql_xlate.h"

static bool f_table_exists(void *ctx, const char *name) {
    (void)ctx;
    return strncmp(name, "dbo.", 4) == 0 || strncmp(name, "cdc.", 4) == 0;
}
static bool f_col_type(void *ctx, const char *tbl, const char *col, sim_type *out, bool *nul) {
    (void)ctx; (void)tbl;
    memset(out, 0, sizeof *out);
    out->id = col[0] == 'v' ? SIM_T_NVARCHAR : SIM_T_INT;
    out->length = 50;
    *nul = true;
    return col[0] != 'x';
}
static bool f_var_type(void *ctx, const char *name, sim_type *out) {
    (void)ctx;
    memset(out, 0, sizeof *out);
    out->id = SIM_T_INT;
    return name[1] != 'z';
}
static bool f_ci_columns(void *ctx, const char *ci, char *buf, size_t cap) {
    (void)ctx;
    snprintf(buf, cap, "\"id\"");
    return ci[0] != 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tsql_tok *t = NULL;
    int n = 0;
    if (tsql_lex(&t, &n, (const char *)data, size, NULL) != MCDC_OK) return 0;
    xl_env env;
    memset(&env, 0, sizeof env);
    env.table_exists = f_table_exists;
    env.col_type = f_col_type;
    env.var_type = f_var_type;
    env.ci_columns = f_ci_columns;
    env.db_name = "lab";
    env.user_name = "reader";
    env.spid = 51;
    env.product_major = 16;
    xl_result *res = mcdc_malloc(sizeof *res);
    if (res) {
        /* each statement-ish slice separately, then the whole */
        int start = 0;
        for (int i = 0; i <= n; i++) {
            if (i == n || tsql_tok_op(&t[i], ";")) {
                mcdc_buf out = {0};
                tsql_xlate(&env, t, start, i, &out, res, NULL);
                mcdc_buf_free(&out);
                sim_fast_table ft;
                if (sim_fast_match_slices(&ft, t, start, i)) {
                    if (!ft.slices || ft.width < 1 || !ft.key[0] || (ft.range && ft.lo > ft.hi)) __builtin_trap();
                    sim_fast_table_free(&ft);
                }
                if (sim_fast_match_table(&ft, t, start, i)) {
                    /* what it recognized must be consistent */
                    if (ft.nitems < 1 || ft.nconst > ft.nitems || (ft.has_where && !ft.key[0])) __builtin_trap();
                    if (ft.range && ft.lo > ft.hi) __builtin_trap();
                    sim_fast_table_free(&ft);
                }
                start = i + 1;
            }
        }
        char buf[256];
        for (int i = 0; i < n; i++) tsql_tok_text(&t[i], buf, sizeof buf);
        int i = 0;
        char parts[4][MCDC_IDENT_BYTES_MAX];
        xl_name_parts(t, &i, n, parts);
        mcdc_free(res);
    }
    mcdc_free(t);
    return 0;
}
