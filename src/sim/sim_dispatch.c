/*
 * sim_dispatch.c - the batch runner: statement boundaries, BEGIN ...
 * END blocks, IF/ELSE, and the dispatch of each statement to its room;
 * PRINT, WAITFOR and CHECKPOINT.
 */
#include "sim_engine_int.h"

#include <stdio.h>
#include <string.h>

/* Finds the end of the statement starting at toks[i]. */
static int stmt_end(const tsql_tok *t, int i, int n) {
    static const char *STARTS[] = {"SELECT", "INSERT", "UPDATE", "DELETE", "CREATE", "ALTER", "DROP", "EXEC",
                                   "EXECUTE", "BEGIN", "COMMIT", "ROLLBACK", "USE", "SET", "DECLARE", "GRANT",
                                   "REVOKE", "DENY", "PRINT", "IF", "WHILE", "RETURN", "TRUNCATE", "WAITFOR",
                                   "CHECKPOINT", "SAVE", "BREAK", "CONTINUE", NULL};
    const tsql_tok *first = &t[i];
    bool is_update = tsql_tok_is(first, "UPDATE"), is_insert = tsql_tok_is(first, "INSERT");
    bool is_perm = tsql_tok_is(first, "GRANT") || tsql_tok_is(first, "REVOKE") || tsql_tok_is(first, "DENY");
    bool is_create = tsql_tok_is(first, "CREATE") || tsql_tok_is(first, "ALTER") || tsql_tok_is(first, "DROP");
    bool seen_set = false, seen_values = false, is_with = tsql_tok_is(first, "WITH"), seen_to = false;
    int d = 0, cases = 0;
    for (int k = i + 1; k < n; k++) {
        if (tsql_tok_op(&t[k], "(")) { d++; continue; }
        if (tsql_tok_op(&t[k], ")")) { d--; continue; }
        if (d > 0) continue;
        if (tsql_tok_op(&t[k], ";")) return k;
        if (t[k].t != TK_IDENT) continue;
        if (tsql_tok_is(&t[k], "CASE")) { cases++; continue; }
        if (tsql_tok_is(&t[k], "END")) { if (cases > 0) cases--; else return k; continue; }
        if (tsql_tok_is(&t[k], "ELSE") && cases == 0) return k; /* IF ... ELSE */
        if (tsql_tok_is(&t[k], "VALUES")) seen_values = true;
        if (is_perm && (tsql_tok_is(&t[k], "TO") || tsql_tok_is(&t[k], "FROM"))) seen_to = true; /* the principals follow */
        if (tsql_tok_is(&t[k], "WITH")) {
            /* a common table expression starts a statement; WITH (NOLOCK),
             * WITH PASSWORD = ... do not */
            if (k + 2 < n && (t[k + 1].t == TK_IDENT || t[k + 1].t == TK_QIDENT) &&
                (tsql_tok_is(&t[k + 2], "AS") || tsql_tok_op(&t[k + 2], "(")))
                return k;
            continue;
        }
        if (tsql_tok_is(&t[k - 1], "WITH")) continue; /* WITH ROLLBACK IMMEDIATE */
        bool start = false;
        for (int w = 0; STARTS[w]; w++) if (tsql_tok_is(&t[k], STARTS[w])) { start = true; break; }
        if (!start) continue;
        const tsql_tok *prev = &t[k - 1];
        if (tsql_tok_is(&t[k], "SELECT")) {
            if (is_with) { is_with = false; continue; } /* the CTE's main query */
            if (tsql_tok_is(prev, "UNION") || tsql_tok_is(prev, "ALL") || tsql_tok_is(prev, "EXCEPT") ||
                tsql_tok_is(prev, "INTERSECT") || is_perm)
                continue;
            if (is_insert && !seen_values) continue;
        }
        if (tsql_tok_is(&t[k], "SET") && is_update && !seen_set) { seen_set = true; continue; }
        if (tsql_tok_is(&t[k], "IF") && (tsql_tok_is(prev, "TABLE") || tsql_tok_is(prev, "DATABASE") ||
                                         tsql_tok_is(prev, "LOGIN") || tsql_tok_is(prev, "USER")))
            continue; /* DROP TABLE IF EXISTS */
        if (is_perm && !seen_to && (tsql_tok_is(&t[k], "EXEC") || tsql_tok_is(&t[k], "EXECUTE") || tsql_tok_is(&t[k], "INSERT") ||
                                    tsql_tok_is(&t[k], "UPDATE") || tsql_tok_is(&t[k], "DELETE") || tsql_tok_is(&t[k], "ALTER")))
            continue; /* GRANT INSERT, UPDATE ON t TO u */
        if (is_create && k == i + 1) continue; /* CREATE/ALTER ... */
        if (tsql_tok_is(&t[k], "SET") && tsql_tok_is(first, "ALTER")) continue;
        if ((tsql_tok_is(&t[k], "DROP") || tsql_tok_is(&t[k], "ALTER")) && tsql_tok_is(first, "ALTER") && k + 1 < n &&
            (tsql_tok_is(&t[k + 1], "COLUMN") || tsql_tok_is(&t[k + 1], "CONSTRAINT")))
            continue; /* ALTER TABLE t DROP COLUMN c, ALTER TABLE t ALTER COLUMN c */
        return k;
    }
    return n;
}

int sim_tok_ident(const tsql_tok *t, char *buf, size_t cap) {
    if (t->t != TK_IDENT && t->t != TK_QIDENT) return -1;
    tsql_tok_text(t, buf, cap);
    return 0;
}

int sim_syntax_err(mcdc_error *err, const tsql_tok *t, int i, int end) {
    if (i >= end || t[i].t == TK_EOF) return sim_err(err, 102, "Incorrect syntax near '%s'.", i > 0 ? "end of statement" : "");
    return sim_err(err, 102, "Incorrect syntax near '%.*s'.", t[i].n > 100 ? 100 : t[i].n, t[i].s);
}

/* Parses a type at toks[*i] ("decimal(18,4)", "varchar(max)"). */
bool sim_parse_type_at(const tsql_tok *t, int *i, int end, sim_type *out, char *text, size_t cap) {
    int k = *i;
    if (k >= end || (t[k].t != TK_IDENT && t[k].t != TK_QIDENT)) return false;
    size_t o = 0;
    char w[MCDC_IDENT_BYTES_MAX];
    tsql_tok_text(&t[k], w, sizeof w);
    o = (size_t)snprintf(text, cap, "%s", w);
    k++;
    if (k < end && tsql_tok_op(&t[k], "(")) {
        while (k < end && o + 1 < cap) {
            int w2 = snprintf(text + o, cap - o, "%.*s", t[k].n, t[k].s);
            if (w2 > 0) o += (size_t)w2;
            if (tsql_tok_op(&t[k], ")")) { k++; break; }
            k++;
        }
    }
    if (o >= cap) o = cap - 1;
    text[o] = 0;
    *i = k;
    return sim_type_parse(out, text, strlen(text));
}

static int run_statement(sim_stmt *x, const tsql_tok *t, int i, int end, mcdc_error *err) {
    const tsql_tok *f = &t[i];
    sim_implicit_begin(x, t, i, end);
    if (tsql_tok_is(f, "SELECT")) return sim_do_select(x, t, i, end, err);
    if (tsql_tok_is(f, "WITH")) return sim_run_query(x, t, i, end, NULL, 0, err);
    if (tsql_tok_op(f, "(")) return sim_run_query(x, t, i, end, NULL, 0, err);
    if (tsql_tok_is(f, "INSERT")) return sim_do_insert(x, t, i, end, err);
    if (tsql_tok_is(f, "UPDATE")) return sim_do_update_delete(x, t, i, end, true, err);
    if (tsql_tok_is(f, "DELETE")) return sim_do_update_delete(x, t, i, end, false, err);
    if (tsql_tok_is(f, "CREATE")) return sim_do_create(x, t, i, end, err);
    if (tsql_tok_is(f, "ALTER")) {
        if (i + 1 < end && tsql_tok_is(&t[i + 1], "TABLE")) {
            /* metadata is not versioned: SQL Server refuses ALTER TABLE in a
             * snapshot transaction */
            if (x->s->trancount > 0 && (x->s->snap_tran || (x->s->iso == SIM_ISO_SNAPSHOT && x->s->tran_iso == 0)))
                return sim_err(err, 3964, "Transaction failed because this DDL statement is not allowed inside a snapshot"
                                          " isolation transaction. Since metadata is not versioned, a metadata change can"
                                          " lead to inconsistency if mixed within snapshot isolation.");
            return sim_do_alter_table(x, t, i, end, NULL, err);
        }
        if (i + 1 < end && tsql_tok_is(&t[i + 1], "DATABASE")) return sim_do_alter_database(x, t, i, end, err);
        if (i + 1 < end && tsql_tok_is(&t[i + 1], "LOGIN")) return sim_do_alter_login(x, t, i, end, err);
        sim_send_done(x, 0, false, false); /* ALTER ROLE ...: accepted */
        return MCDC_OK;
    }
    if (tsql_tok_is(f, "DROP")) return sim_do_drop(x, t, i, end, err);
    if (tsql_tok_is(f, "GRANT") || tsql_tok_is(f, "REVOKE") || tsql_tok_is(f, "DENY")) return sim_do_grant(x, t, i, end, err);
    if (tsql_tok_is(f, "USE")) return sim_do_use(x, t, i, end, err);
    if (tsql_tok_is(f, "BEGIN")) {
        if (i + 1 < end && (tsql_tok_is(&t[i + 1], "TRAN") || tsql_tok_is(&t[i + 1], "TRANSACTION")))
            return sim_do_tran(x, t, i, end, err);
        return sim_err(err, 50000, "BEGIN ... END blocks are not supported by the simulator");
    }
    if (tsql_tok_is(f, "COMMIT") || tsql_tok_is(f, "ROLLBACK")) return sim_do_tran(x, t, i, end, err);
    if (tsql_tok_is(f, "DECLARE")) return sim_do_declare(x, t, i, end, err);
    if (tsql_tok_is(f, "SET")) return sim_do_set(x, t, i, end, err);
    if (tsql_tok_is(f, "EXEC") || tsql_tok_is(f, "EXECUTE")) return sim_do_exec(x, t, i, end, err);
    if (tsql_tok_is(f, "CHECKPOINT")) { sim_send_done(x, 0, false, false); return MCDC_OK; }
    if (tsql_tok_is(f, "PRINT")) {
        sqlite3_value *v = NULL;
        int rc = sim_eval_value(x, t, i + 1, end, &v, err);
        if (rc == MCDC_OK) {
            const unsigned char *txt = v ? sqlite3_value_text(v) : NULL;
            if (x->sink->message && x->sink->message(x->sink->ctx, false, 0, 1, 0, txt ? (const char *)txt : "", "", f->line))
                x->aborted = true;
            sim_send_done(x, 0, false, false);
        }
        sqlite3_value_free(v);
        return rc;
    }
    if (tsql_tok_is(f, "WAITFOR")) {
        /* WAITFOR DELAY 'hh:mm:ss[.mmm]' (real time, at most 60 s) */
        char d[32] = "";
        if (i + 2 < end && tsql_tok_is(&t[i + 1], "DELAY")) tsql_tok_text(&t[i + 2], d, sizeof d);
        int h = 0, m = 0;
        double sec = 0;
        if (sscanf(d, "%d:%d:%lf", &h, &m, &sec) >= 2) {
            double ms = ((h * 60.0 + m) * 60.0 + sec) * 1000.0;
            if (ms > 60000) ms = 60000;
            mcdc_sleep_ms((int64_t)ms);
        }
        sim_send_done(x, 0, false, false);
        return MCDC_OK;
    }
    if (tsql_tok_is(f, "BREAK") || tsql_tok_is(f, "CONTINUE")) {
        bool brk = tsql_tok_is(f, "BREAK");
        if (x->loops == 0)
            return sim_err(err, brk ? 135 : 136, "Cannot use a %s statement outside the scope of a WHILE statement.",
                           brk ? "BREAK" : "CONTINUE");
        if (brk) x->loop_break = true;
        else x->loop_continue = true;
        return MCDC_OK;
    }
    if (tsql_tok_is(f, "TRUNCATE")) {
        return sim_err(err, 50000, "TRUNCATE TABLE is not supported by the simulator (use DELETE)");
    }
    return sim_syntax_err(err, t, i, end);
}

static bool is_block_begin(const tsql_tok *t, int i, int n) {
    return tsql_tok_is(&t[i], "BEGIN") &&
           !(i + 1 < n && (tsql_tok_is(&t[i + 1], "TRAN") || tsql_tok_is(&t[i + 1], "TRANSACTION") ||
                           tsql_tok_is(&t[i + 1], "DISTRIBUTED")));
}

/* End (exclusive) of the statement or BEGIN ... END block at i. */
static int unit_end(const tsql_tok *t, int i, int n) {
    if (i < n && is_block_begin(t, i, n)) {
        int d = 0;
        for (int k = i; k < n; k++) {
            if (is_block_begin(t, k, n) || tsql_tok_is(&t[k], "CASE")) d++;
            else if (tsql_tok_is(&t[k], "END") && --d == 0) return k + 1;
        }
        return n;
    }
    return i < n ? stmt_end(t, i, n) : n;
}

/* Runs the statement or block [a, b). */
static void run_unit(sim_stmt *x, const tsql_tok *t, int a, int b) {
    if (a < b && is_block_begin(t, a, b)) sim_run_tokens(x, t + a + 1, b - a - 2);
    else if (a < b) sim_run_tokens(x, t + a, b - a);
}

static int cond_end(const tsql_tok *t, int i, int n);
static int eval_cond(sim_stmt *x, const tsql_tok *t, int a, int k, bool *yes, mcdc_error *err);

/* The most iterations of one WHILE: a loop whose condition never turns
 * false ends with an error rather than hanging the session. */
#define WHILE_ITERATIONS_MAX 1000000

/* WHILE <condition> <statement|block>, with BREAK and CONTINUE; returns the end. */
static int run_while(sim_stmt *x, const tsql_tok *t, int i, int n) {
    int k = cond_end(t, i, n);
    mcdc_error err = MCDC_ERROR_INIT;
    if (k >= n || k == i + 1) {
        sim_err(&err, 102, "Incorrect syntax near '%s'.", k >= n ? "end of batch" : "WHILE");
        sim_send_error(x, &err, t[i].line);
        return n;
    }
    int te = unit_end(t, k, n);
    x->loops++;
    for (long it = 0; !x->aborted && !x->batch_ended; it++) {
        bool yes = false;
        if (it >= WHILE_ITERATIONS_MAX) {
            sim_err(&err, 50000, "the simulator stops a WHILE loop after %d iterations", WHILE_ITERATIONS_MAX);
            sim_send_error(x, &err, t[i].line);
            break;
        }
        if (eval_cond(x, t, i, k, &yes, &err) != MCDC_OK) { sim_send_error(x, &err, t[i].line); break; }
        if (!yes) break;
        run_unit(x, t, k, te);
        x->loop_continue = false;
        if (x->loop_break) break;
    }
    x->loop_break = x->loop_continue = false;
    x->loops--;
    return te;
}

/* IF <condition> <statement|block> [ELSE <statement|block>]; returns the end. */
static int run_if(sim_stmt *x, const tsql_tok *t, int i, int n) {
    int k = cond_end(t, i, n);
    mcdc_error err = MCDC_ERROR_INIT;
    if (k >= n || k == i + 1) {
        sim_err(&err, 102, "Incorrect syntax near '%s'.", k >= n ? "end of batch" : "IF");
        sim_send_error(x, &err, t[i].line);
        return n;
    }
    bool yes = false;
    int rc = eval_cond(x, t, i, k, &yes, &err);
    if (rc != MCDC_OK) sim_send_error(x, &err, t[i].line);
    int te = unit_end(t, k, n);
    int next = te;
    while (next < n && tsql_tok_op(&t[next], ";")) next++;
    int es = -1, ee = next;
    if (next < n && tsql_tok_is(&t[next], "ELSE")) {
        es = next + 1;
        ee = unit_end(t, es, n);
    }
    if (rc == MCDC_OK) {
        if (yes) run_unit(x, t, k, te);
        else if (es >= 0) run_unit(x, t, es, ee);
    }
    return es >= 0 ? ee : te;
}

/* The condition of IF/WHILE at i runs to the first statement start at
 * depth 0: its index. */
static int cond_end(const tsql_tok *t, int i, int n) {
    int k = i + 1, d = 0;
    static const char *STARTS[] = {"SELECT", "INSERT", "UPDATE", "DELETE", "CREATE", "ALTER", "DROP", "EXEC",
                                   "EXECUTE", "BEGIN", "COMMIT", "ROLLBACK", "USE", "SET", "DECLARE", "GRANT",
                                   "PRINT", "IF", "RETURN", "WITH", "WHILE", "WAITFOR", "BREAK", "CONTINUE", NULL};
    for (; k < n; k++) {
        if (tsql_tok_op(&t[k], "(")) d++;
        else if (tsql_tok_op(&t[k], ")")) d--;
        else if (d == 0) {
            bool st = false;
            for (int w = 0; STARTS[w]; w++) if (tsql_tok_is(&t[k], STARTS[w])) st = true;
            if (st) break;
        }
    }
    return k;
}

/* The condition [i + 1, k) of IF/WHILE at i, evaluated. */
static int eval_cond(sim_stmt *x, const tsql_tok *t, int i, int k, bool *yes, mcdc_error *err) {
    /* CASE WHEN <cond> THEN 1 ELSE 0 END */
    int cn = k - (i + 1);
    tsql_tok *c = mcdc_malloc(((size_t)cn + 8) * sizeof *c);
    if (!c) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    static const char *W[] = {"CASE", "WHEN", "THEN", "1", "ELSE", "0", "END"};
    tsql_tok mk[7];
    for (int w = 0; w < 7; w++) {
        mk[w].t = w == 3 || w == 5 ? TK_NUM : TK_IDENT;
        mk[w].s = W[w];
        mk[w].n = (int)strlen(W[w]);
        mk[w].line = t[i].line;
    }
    int o = 0;
    c[o++] = mk[0];
    c[o++] = mk[1];
    memcpy(c + o, t + i + 1, (size_t)cn * sizeof *c);
    o += cn;
    for (int w = 2; w < 7; w++) c[o++] = mk[w];
    c[o].t = TK_EOF;
    c[o].s = "";
    c[o].n = 0;
    sqlite3_value *v = NULL;
    int rc = sim_eval_value(x, c, 0, o, &v, err);
    mcdc_free(c);
    *yes = rc == MCDC_OK && v && sqlite3_value_int(v) == 1;
    sqlite3_value_free(v);
    return rc;
}

/* Runs all statements of a token array. Returns SIM_EXEC_OK / ABORTED. */
int sim_run_tokens(sim_stmt *x, const tsql_tok *t, int n) {
    int i = 0;
    while (i < n && !x->aborted && !x->batch_ended && !x->loop_break && !x->loop_continue) {
        if (tsql_tok_op(&t[i], ";")) { i++; continue; }
        if (tsql_tok_is(&t[i], "GO")) { i++; continue; }
        if (tsql_tok_is(&t[i], "IF")) { i = run_if(x, t, i, n); continue; }
        if (tsql_tok_is(&t[i], "WHILE")) { i = run_while(x, t, i, n); continue; }
        if (is_block_begin(t, i, n)) {
            int e = unit_end(t, i, n);
            run_unit(x, t, i, e);
            i = e;
            continue;
        }
        int end = stmt_end(t, i, n);
        mcdc_error err = MCDC_ERROR_INIT;
        int rc = run_statement(x, t, i, end, &err);
        if (rc != MCDC_OK) {
            sim_send_error(x, &err, t[i].line);
            /* compile errors end the batch, as SQL Server's parse would; so
             * does being the deadlock victim, at every nesting level */
            if (err.server_number == 102 || err.server_number == 105) break;
            if (err.server_number == 1205) x->batch_ended = true;
        }
        i = end;
    }
    return x->aborted ? SIM_EXEC_ABORTED : SIM_EXEC_OK;
}

int sim_exec_batch(sim_session *s, const char *sql, size_t len, const sim_sink *sink) {
    sim_stmt x = {s, sink, false, false, sql, NULL, 0, 0, false, 0, false, false};
    tsql_tok *t = NULL;
    int n = 0;
    mcdc_error err = MCDC_ERROR_INIT;
    s->requests++;
    sim_vars_clear(s);
    if (tsql_lex(&t, &n, sql, len, &err) != MCDC_OK) {
        if (!err.server_number) { err.server_number = err.code == MCDC_E_LIMIT ? 8621 : 105; err.server_class = 15; }
        sim_send_error(&x, &err, 1);
        return x.aborted ? SIM_EXEC_ABORTED : SIM_EXEC_OK;
    }
    int rc = sim_run_tokens(&x, t, n);
    mcdc_free(t);
    sim_vars_clear(s);
    return rc;
}
