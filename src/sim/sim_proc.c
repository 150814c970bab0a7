/*
 * sim_proc.c - procedures: EXEC with named or positional arguments
 * and OUTPUT variables, sp_executesql with @params and RETURNVALUE tokens,
 * RPC requests; the CDC and sim.* procedures are in sim_cdc.c.
 */
#include "sim_engine_int.h"

#include <stdio.h>
#include <string.h>

/* The parameters an sp_executesql declared (@params), in order. */
typedef struct sql_params {
    int n;
    char names[32][SIM_NAME_MAX]; /* with '@' */
    int arg[32];                  /* the procedure argument that supplied it, -1 none */
    bool output[32];              /* declared OUTPUT */
} sql_params;

/* EXEC proc args: evaluates arguments into a sim_proc_args. */
static void args_free(sim_proc_args *a) {
    for (int k = 0; k < a->n; k++) sqlite3_value_free(a->vals[k]);
    a->n = 0;
}

static int run_proc(sim_stmt *x, const char *proc, sim_proc_args *a, sql_params *dp, mcdc_error *err);

int sim_do_exec(sim_stmt *x, const tsql_tok *t, int i, int end, mcdc_error *err) {
    i++;
    if (i + 1 < end && t[i].t == TK_VAR && tsql_tok_op(&t[i + 1], "=")) i += 2; /* @rc = proc */
    char parts[4][MCDC_IDENT_BYTES_MAX];
    int np = xl_name_parts(t, &i, end, parts);
    if (np == 0) return sim_syntax_err(err, t, i, end);
    char proc[SIM_NAME_MAX * 2];
    if (np >= 2 && parts[np - 2][0]) snprintf(proc, sizeof proc, "%s.%s", parts[np - 2], parts[np - 1]);
    else snprintf(proc, sizeof proc, "%s", parts[np - 1]);
    sim_proc_args *a = mcdc_calloc(1, sizeof *a);
    sql_params *dp = mcdc_calloc(1, sizeof *dp);
    int *out_tok = mcdc_calloc(32, sizeof *out_tok); /* OUTPUT argument: its caller variable's token + 1 */
    if (!a || !dp || !out_tok) {
        mcdc_free(a);
        mcdc_free(dp);
        mcdc_free(out_tok);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    int rc = MCDC_OK;
    while (i < end && rc == MCDC_OK) {
        if (tsql_tok_op(&t[i], ",")) { i++; continue; }
        if (a->n >= 32) { rc = mcdc_error_set(err, MCDC_E_LIMIT, "more than 32 procedure arguments"); break; }
        a->names[a->n][0] = 0;
        if (t[i].t == TK_VAR && i + 1 < end && tsql_tok_op(&t[i + 1], "=")) {
            snprintf(a->names[a->n], SIM_NAME_MAX, "%.*s", t[i].n, t[i].s);
            i += 2;
        }
        int s0 = i, d = 0;
        while (i < end) {
            if (tsql_tok_op(&t[i], "(")) d++;
            else if (tsql_tok_op(&t[i], ")")) d--;
            else if (d == 0 && (tsql_tok_op(&t[i], ",") || tsql_tok_is(&t[i], "OUTPUT") || tsql_tok_is(&t[i], "OUT"))) break;
            i++;
        }
        rc = sim_eval_value(x, t, s0, i, &a->vals[a->n], err);
        if (i < end && (tsql_tok_is(&t[i], "OUTPUT") || tsql_tok_is(&t[i], "OUT"))) {
            if (i == s0 + 1 && t[s0].t == TK_VAR) out_tok[a->n] = s0 + 1;
            i++;
        }
        a->n++;
    }
    if (rc == MCDC_OK) rc = run_proc(x, proc, a, dp, err);
    /* @callee = @caller OUTPUT: the caller's variable takes the value */
    for (int d = 0; d < dp->n && rc == MCDC_OK; d++) {
        int k = dp->arg[d];
        if (k < 0 || !dp->output[d] || !out_tok[k]) continue;
        char cn[SIM_NAME_MAX];
        snprintf(cn, sizeof cn, "%.*s", t[out_tok[k] - 1].n, t[out_tok[k] - 1].s);
        sim_var *from = sim_var_find(x->s, dp->names[d]), *to = sim_var_find(x->s, cn);
        if (!to) { rc = sim_err(err, 137, "Must declare the scalar variable \"%s\".", cn); break; }
        if (!from || from == to) continue;
        sqlite3_stmt *st = x->s->conv; /* the value as an sqlite3_value */
        sqlite3_reset(st);
        sim_type vt = from->type;
        char tn[64];
        sim_type_format(&vt, tn, sizeof tn);
        if (from->kind == SQLITE_INTEGER) sqlite3_bind_int64(st, 1, from->i);
        else if (from->kind == SQLITE_FLOAT) sqlite3_bind_double(st, 1, from->f);
        else if (from->kind == SQLITE_TEXT) sqlite3_bind_text(st, 1, (const char *)from->p, (int)from->n, SQLITE_TRANSIENT);
        else if (from->kind == SQLITE_BLOB) sqlite3_bind_blob(st, 1, from->p, (int)from->n, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 2, tn, -1, SQLITE_TRANSIENT);
        sqlite3_value *val = sqlite3_step(st) == SQLITE_ROW ? sqlite3_value_dup(sqlite3_column_value(st, 0)) : NULL;
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        rc = val ? sim_var_assign(x->s, to, val, err) : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        sqlite3_value_free(val);
    }
    args_free(a);
    mcdc_free(a);
    mcdc_free(dp);
    mcdc_free(out_tok);
    return rc;
}

/* sp_executesql: @stmt, @params, values. */
static int arg_index(const sim_proc_args *a, const char *name) {
    for (int k = 0; k < a->n; k++)
        if (mcdc_str_ieq(a->names[k], name)) return k;
    return -1;
}

static int exec_sql_with_params(sim_stmt *x, sim_proc_args *a, sql_params *dp, mcdc_error *err) {
    sim_session *s = x->s;
    dp->n = 0;
    const char *stmt = sim_arg_text(a, "@stmt", 0);
    if (!stmt) return sim_err(err, 214, "Procedure expects parameter '@statement' of type 'ntext/nchar/nvarchar'.");
    const char *decl = sim_arg_text(a, "@params", 1);
    int rc = MCDC_OK;
    /* declare the parameters */
    if (decl && decl[0]) {
        tsql_tok *dt = NULL;
        int dn = 0;
        rc = tsql_lex(&dt, &dn, decl, strlen(decl), err);
        int i = 0, pos = 2;
        while (rc == MCDC_OK && i < dn) {
            if (tsql_tok_op(&dt[i], ",")) { i++; continue; }
            if (dt[i].t != TK_VAR) { rc = sim_syntax_err(err, dt, i, dn); break; }
            char name[SIM_NAME_MAX], tt[64];
            snprintf(name, sizeof name, "%.*s", dt[i].n, dt[i].s);
            i++;
            sim_type ty;
            if (!sim_parse_type_at(dt, &i, dn, &ty, tt, sizeof tt)) { rc = sim_err(err, 2715, "Cannot find data type %s.", tt); break; }
            bool out = false;
            for (; i < dn && !tsql_tok_op(&dt[i], ","); i++) /* OUTPUT, = default */
                if (tsql_tok_is(&dt[i], "OUTPUT") || tsql_tok_is(&dt[i], "OUT")) out = true;
            sim_var *v = sim_var_find(s, name);
            if (!v) {
                rc = sim_var_declare(s, name, &ty, err);
                v = sim_var_find(s, name);
            }
            if (rc != MCDC_OK || !v) break;
            int ai = arg_index(a, name);
            if (ai < 0 && pos < a->n && !a->names[pos][0]) ai = pos;
            pos++;
            if (dp->n < 32) {
                snprintf(dp->names[dp->n], SIM_NAME_MAX, "%s", name);
                dp->arg[dp->n] = ai;
                dp->output[dp->n++] = out;
            }
            if (ai >= 0 && x->rpc_params && ai + x->rpc_first < x->rpc_nparams &&
                x->rpc_params[ai + x->rpc_first].output && !out)
                rc = sim_err(err, 8162,
                             "The formal parameter \"%s\" was not declared as an OUTPUT parameter, but the actual"
                             " parameter passed in requested output.", name);
            if (rc == MCDC_OK && ai >= 0) rc = sim_var_assign(s, v, a->vals[ai], err);
        }
        mcdc_free(dt);
    }
    if (rc != MCDC_OK) return rc;
    tsql_tok *toks = NULL;
    int n = 0;
    rc = tsql_lex(&toks, &n, stmt, strlen(stmt), err);
    if (rc != MCDC_OK) {
        if (err && !err->server_number) { err->server_number = 102; err->server_class = 15; }
        return rc;
    }
    bool save = x->in_proc;
    const sim_param *rp = x->rpc_params;
    /* SET options the statement changes last until it returns, as in SQL
     * Server's modules and dynamic SQL */
    int iso = s->iso;
    int64_t lock_timeout = s->lock_timeout_ms;
    x->in_proc = true;
    x->rpc_params = NULL; /* an EXEC inside is no RPC */
    rc = sim_run_tokens(x, toks, n);
    x->in_proc = save;
    x->rpc_params = rp;
    s->iso = iso;
    s->lock_timeout_ms = lock_timeout;
    mcdc_free(toks);
    return rc == SIM_EXEC_ABORTED ? -998 : MCDC_OK;
}

/* RETURNVALUE tokens for the RPC's OUTPUT parameters, in RPC order. */
static void send_outputs(sim_stmt *x, const sql_params *dp) {
    if (!x->rpc_params || !x->sink->return_value) return;
    for (int k = x->rpc_first; k < x->rpc_nparams && !x->aborted; k++) {
        if (!x->rpc_params[k].output) continue;
        for (int d = 0; d < dp->n; d++) {
            if (dp->arg[d] != k - x->rpc_first || !dp->output[d]) continue;
            sim_var *v = sim_var_find(x->s, dp->names[d]);
            if (!v) break;
            sim_value val = sim_var_value(v);
            if (x->sink->return_value(x->sink->ctx, k, dp->names[d], &v->type, &val)) x->aborted = true;
            break;
        }
    }
}

static int run_proc(sim_stmt *x, const char *proc, sim_proc_args *a, sql_params *dp, mcdc_error *err) {
    const char *p = proc;
    if (sim_ci_prefix(p, "dbo.") ) p += 4;
    int status = 0, rc;
    bool handled = false, sql = false;
    bool save = x->in_proc;
    x->in_proc = true;
    dp->n = 0;
    if (mcdc_str_ieq(p, "sp_executesql") || mcdc_str_ieq(p, "sys.sp_executesql")) {
        rc = exec_sql_with_params(x, a, dp, err);
        handled = sql = true;
        if (rc == -998) { x->in_proc = save; return MCDC_OK; }
    } else {
        rc = sim_cdc_proc(x->s, p, a, x->sink, &status, err, &handled);
    }
    x->in_proc = save;
    if (!handled)
        return sim_err(err, 2812, "Could not find stored procedure '%s'.", proc);
    if (rc != MCDC_OK) return rc;
    if (x->sink->return_status && x->sink->return_status(x->sink->ctx, status)) x->aborted = true;
    if (sql) send_outputs(x, dp);
    sim_send_done(x, 0, false, false);
    return MCDC_OK;
}

sqlite3_value *sim_arg(const sim_proc_args *a, const char *name, int pos) {
    for (int k = 0; k < a->n; k++) if (a->names[k][0] && mcdc_str_ieq(a->names[k], name)) return a->vals[k];
    if (pos >= 0 && pos < a->n && !a->names[pos][0]) return a->vals[pos];
    return NULL;
}

const char *sim_arg_text(const sim_proc_args *a, const char *name, int pos) {
    sqlite3_value *v = sim_arg(a, name, pos);
    if (!v || sqlite3_value_type(v) == SQLITE_NULL) return NULL;
    return (const char *)sqlite3_value_text(v);
}

int sim_exec_rpc(sim_session *s, const char *proc_name, const sim_param *params, int nparams, const sim_sink *sink) {
    sim_stmt x = {s, sink, false, false, "", params, nparams, 0, false, 0, false, false};
    mcdc_error err = MCDC_ERROR_INIT;
    s->requests++;
    sim_vars_clear(s);
    sim_proc_args *a = mcdc_calloc(1, sizeof *a);
    sql_params *dp = mcdc_calloc(1, sizeof *dp);
    if (!a || !dp) {
        mcdc_free(a);
        mcdc_free(dp);
        return SIM_EXEC_ABORTED;
    }
    /* values into sqlite3_values via the conversion statement */
    int rc = MCDC_OK;
    const char *proc = proc_name;
    int first = 0;
    if (mcdc_str_ieq(proc, "sp_prepexec")) { proc = "sp_executesql"; first = 1; }
    x.rpc_first = first;
    for (int k = first; k < nparams && k - first < 32 && rc == MCDC_OK; k++) {
        const sim_param *p = &params[k];
        snprintf(a->names[a->n], SIM_NAME_MAX, "%s", p->name ? p->name : "");
        sqlite3_stmt *st = s->conv;
        sqlite3_reset(st);
        switch (p->value.kind) {
        case SIM_V_INT: sqlite3_bind_int64(st, 1, p->value.i); break;
        case SIM_V_REAL: sqlite3_bind_double(st, 1, p->value.f); break;
        case SIM_V_TEXT: sqlite3_bind_text(st, 1, (const char *)p->value.p, (int)p->value.n, SQLITE_TRANSIENT); break;
        case SIM_V_BLOB: sqlite3_bind_blob(st, 1, p->value.p, (int)p->value.n, SQLITE_TRANSIENT); break;
        default: sqlite3_bind_null(st, 1); break;
        }
        char tn[64];
        sim_type_format(&p->type, tn, sizeof tn);
        if (p->type.id == 0) snprintf(tn, sizeof tn, "nvarchar(max)");
        sqlite3_bind_text(st, 2, tn, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(st) == SQLITE_ROW) a->vals[a->n] = sqlite3_value_dup(sqlite3_column_value(st, 0));
        else rc = sim_sqlite_err(s->rd, SQLITE_ERROR, &err);
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        a->n++;
    }
    if (rc == MCDC_OK) rc = run_proc(&x, proc, a, dp, &err);
    if (rc != MCDC_OK) sim_send_error(&x, &err, 1);
    args_free(a);
    mcdc_free(a);
    mcdc_free(dp);
    sim_vars_clear(s);
    return x.aborted ? SIM_EXEC_ABORTED : SIM_EXEC_OK;
}
