/*
 * sim_vars.c - T-SQL variables of a batch (DECLARE, SET @v, binding
 * them into SQLite statements) and the session options SET changes
 * (NOCOUNT, IMPLICIT_TRANSACTIONS, LOCK_TIMEOUT, isolation level).
 */
#include "sim_engine_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- variables ---------------------------------------------------------- */
sim_var *sim_var_find(sim_session *s, const char *name) {
    for (int k = 0; k < s->nvars; k++) if (mcdc_str_ieq(s->vars[k].name, name)) return &s->vars[k];
    return NULL;
}

int sim_var_declare(sim_session *s, const char *name, const sim_type *t, mcdc_error *err) {
    if (sim_var_find(s, name))
        return sim_err(err, 134, "The variable name '%s' has already been declared. Variable names must be unique within a query batch or stored procedure.", name);
    if (s->nvars >= SIM_VARS_MAX) return mcdc_error_set(err, MCDC_E_LIMIT, "more than %d variables in a batch", SIM_VARS_MAX);
    sim_var *v = &s->vars[s->nvars++];
    memset(v, 0, sizeof *v);
    snprintf(v->name, sizeof v->name, "%s", name);
    v->type = *t;
    v->kind = SQLITE_NULL;
    return MCDC_OK;
}

/* Assigns a value converted to the variable's type. */
int sim_var_assign(sim_session *s, sim_var *v, sqlite3_value *val, mcdc_error *err) {
    char tn[64];
    sim_type_format(&v->type, tn, sizeof tn);
    sqlite3_reset(s->conv);
    sqlite3_bind_value(s->conv, 1, val);
    sqlite3_bind_text(s->conv, 2, tn, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(s->conv);
    if (rc != SQLITE_ROW) {
        int r = sim_sqlite_err(s->rd, rc, err);
        sqlite3_reset(s->conv);
        return r;
    }
    mcdc_free(v->p);
    v->p = NULL;
    v->n = 0;
    v->kind = sqlite3_column_type(s->conv, 0);
    if (v->kind == SQLITE_INTEGER) v->i = sqlite3_column_int64(s->conv, 0);
    else if (v->kind == SQLITE_FLOAT) v->f = sqlite3_column_double(s->conv, 0);
    else if (v->kind == SQLITE_TEXT || v->kind == SQLITE_BLOB) {
        const void *p = v->kind == SQLITE_TEXT ? (const void *)sqlite3_column_text(s->conv, 0) : sqlite3_column_blob(s->conv, 0);
        v->n = (size_t)sqlite3_column_bytes(s->conv, 0);
        v->p = mcdc_malloc(v->n + 1);
        if (!v->p) { sqlite3_reset(s->conv); return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory"); }
        if (v->n) memcpy(v->p, p, v->n);
        v->p[v->n] = 0;
    }
    sqlite3_reset(s->conv);
    sqlite3_clear_bindings(s->conv);
    return MCDC_OK;
}

int sim_bind_vars(sim_session *s, sqlite3_stmt *st, mcdc_error *err) {
    int n = sqlite3_bind_parameter_count(st);
    for (int k = 1; k <= n; k++) {
        const char *nm = sqlite3_bind_parameter_name(st, k);
        if (!nm) return sim_err(err, 102, "Incorrect syntax near '?'.");
        if (nm[0] == '$' && nm[1] == '_' && nm[2] == '_') continue; /* the engine's own (fast path) */
        sim_var *v = sim_var_find(s, nm);
        if (!v) return sim_err(err, 137, "Must declare the scalar variable \"%s\".", nm);
        switch (v->kind) {
        case SQLITE_INTEGER: sqlite3_bind_int64(st, k, v->i); break;
        case SQLITE_FLOAT: sqlite3_bind_double(st, k, v->f); break;
        case SQLITE_TEXT: sqlite3_bind_text(st, k, (const char *)v->p, (int)v->n, SQLITE_STATIC); break;
        case SQLITE_BLOB: sqlite3_bind_blob(st, k, v->p, (int)v->n, SQLITE_STATIC); break;
        default: sqlite3_bind_null(st, k); break;
        }
    }
    return MCDC_OK;
}

void sim_vars_clear(sim_session *s) {
    for (int k = 0; k < s->nvars; k++) mcdc_free(s->vars[k].p);
    s->nvars = 0;
}

/* A variable's value as the sink hands values out (borrowed from v). */
sim_value sim_var_value(const sim_var *v) {
    sim_value r = {SIM_V_NULL, 0, 0, NULL, 0};
    switch (v->kind) {
    case SQLITE_INTEGER: r.kind = SIM_V_INT; r.i = v->i; break;
    case SQLITE_FLOAT: r.kind = SIM_V_REAL; r.f = v->f; break;
    case SQLITE_TEXT: r.kind = SIM_V_TEXT; r.p = v->p; r.n = v->n; break;
    case SQLITE_BLOB: r.kind = SIM_V_BLOB; r.p = v->p; r.n = v->n; break;
    default: break;
    }
    return r;
}

int sim_do_declare(sim_stmt *x, const tsql_tok *t, int i, int end, mcdc_error *err) {
    i++;
    while (i < end) {
        if (tsql_tok_op(&t[i], ",")) { i++; continue; }
        if (t[i].t != TK_VAR) return sim_syntax_err(err, t, i, end);
        char name[SIM_NAME_MAX], tt[64];
        snprintf(name, sizeof name, "%.*s", t[i].n, t[i].s);
        i++;
        if (i < end && tsql_tok_is(&t[i], "AS")) i++;
        sim_type ty;
        if (!sim_parse_type_at(t, &i, end, &ty, tt, sizeof tt))
            return sim_err(err, 2715, "Column, parameter, or variable #1: Cannot find data type %s.", tt);
        int rc = sim_var_declare(x->s, name, &ty, err);
        if (rc != MCDC_OK) return rc;
        if (i < end && tsql_tok_op(&t[i], "=")) {
            i++;
            int a = i, d = 0;
            while (i < end) {
                if (tsql_tok_op(&t[i], "(")) d++;
                else if (tsql_tok_op(&t[i], ")")) d--;
                else if (d == 0 && tsql_tok_op(&t[i], ",")) break;
                i++;
            }
            rc = sim_eval_into(x, t, a, i, sim_var_find(x->s, name), err);
            if (rc != MCDC_OK) return rc;
        }
    }
    sim_send_done(x, 0, false, false);
    return MCDC_OK;
}

int sim_do_set(sim_stmt *x, const tsql_tok *t, int i, int end, mcdc_error *err) {
    sim_session *s = x->s;
    i++;
    if (i < end && t[i].t == TK_VAR) {
        char name[SIM_NAME_MAX];
        snprintf(name, sizeof name, "%.*s", t[i].n, t[i].s);
        sim_var *v = sim_var_find(s, name);
        if (!v) return sim_err(err, 137, "Must declare the scalar variable \"%s\".", name);
        if (i + 1 >= end || !tsql_tok_op(&t[i + 1], "=")) return sim_syntax_err(err, t, i + 1, end);
        int rc = sim_eval_into(x, t, i + 2, end, v, err);
        if (rc == MCDC_OK) sim_send_done(x, 0, false, false);
        return rc;
    }
    if (i + 1 < end && tsql_tok_is(&t[i], "NOCOUNT")) s->nocount = tsql_tok_is(&t[i + 1], "ON");
    if (i + 1 < end && tsql_tok_is(&t[i], "IMPLICIT_TRANSACTIONS")) s->implicit_tx = tsql_tok_is(&t[i + 1], "ON");
    if (i + 1 < end && tsql_tok_is(&t[i], "LOCK_TIMEOUT")) {
        bool neg = i + 2 < end && tsql_tok_op(&t[i + 1], "-");
        const tsql_tok *nt = &t[neg ? i + 2 : i + 1];
        if (nt->t != TK_NUM) return sim_syntax_err(err, t, i + 1, end);
        char num[32];
        snprintf(num, sizeof num, "%.*s", nt->n < 31 ? nt->n : 31, nt->s);
        long long v = strtoll(num, NULL, 10);
        s->lock_timeout_ms = neg ? -1 : v;
    }
    if (i + 1 < end && tsql_tok_is(&t[i], "TRANSACTION")) {
        /* SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED | READ COMMITTED
         * | REPEATABLE READ | SNAPSHOT | SERIALIZABLE (the last two as READ
         * COMMITTED: the deviations in sim_engine.c) */
        int k = i + 1;
        if (!(k + 1 < end && tsql_tok_is(&t[k], "ISOLATION") && tsql_tok_is(&t[k + 1], "LEVEL")))
            return sim_syntax_err(err, t, k + (k < end && tsql_tok_is(&t[k], "ISOLATION")), end);
        k += 2;
        int iso = -1;
        if (k + 1 < end && tsql_tok_is(&t[k], "READ") && tsql_tok_is(&t[k + 1], "UNCOMMITTED")) iso = SIM_ISO_READ_UNCOMMITTED, k += 2;
        else if (k + 1 < end && tsql_tok_is(&t[k], "READ") && tsql_tok_is(&t[k + 1], "COMMITTED")) iso = SIM_ISO_READ_COMMITTED, k += 2;
        else if (k + 1 < end && tsql_tok_is(&t[k], "REPEATABLE") && tsql_tok_is(&t[k + 1], "READ")) iso = SIM_ISO_REPEATABLE_READ, k += 2;
        else if (k < end && tsql_tok_is(&t[k], "SNAPSHOT")) iso = SIM_ISO_SNAPSHOT, k++;
        else if (k < end && tsql_tok_is(&t[k], "SERIALIZABLE")) iso = SIM_ISO_SERIALIZABLE, k++;
        if (iso < 0 || k != end) return sim_syntax_err(err, t, iso < 0 ? (k < end && tsql_tok_is(&t[k], "READ") ? k + 1 : k) : k, end);
        s->iso = iso;
    }
    /* TEXTSIZE, ANSI_*, XACT_ABORT...: accepted */
    sim_send_done(x, 0, false, false);
    return MCDC_OK;
}
