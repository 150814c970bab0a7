/*
 * sim_emit.c - result emission: column metadata of a SQLite
 * statement as SQL Server would type it, rows to the sink, and the DONE,
 * ERROR and INFO messages of a statement.
 */
#include "sim_engine_int.h"

#include <stdio.h>
#include <string.h>

/* ---- result emission ---------------------------------------------------- */
/* The type a value gives its column when nothing else tells (v NULL: no
 * row, an int). */
static void value_type(const sim_value *v, sim_type *t) {
    memset(t, 0, sizeof *t);
    switch (v ? v->kind : SIM_V_NULL) {
    case SIM_V_INT: t->id = v->i >= INT32_MIN && v->i <= INT32_MAX ? SIM_T_INT : SIM_T_BIGINT; break;
    case SIM_V_REAL: t->id = SIM_T_FLOAT; break;
    case SIM_V_TEXT: t->id = SIM_T_NVARCHAR; t->length = 4000; break;
    case SIM_V_BLOB: t->id = SIM_T_VARBINARY; t->length = 8000; break;
    default: t->id = SIM_T_INT; break;
    }
}

/* Column metadata of st: forced columns, the translator's items, the origin
 * column, else the first row's value type (returns false when that last
 * fallback was needed). */
static bool column_meta(sqlite3 *c, sqlite3_stmt *st, int first_rc, const sim_value *first, const xl_result *items,
                        const sim_column *forced, int nforced, sim_column *cols, char (*names)[SIM_NAME_MAX], int n) {
    bool all_known = true;
    for (int k = 0; k < n; k++) {
        sim_column *col = &cols[k];
        bool done = false;
        if (forced && k < nforced) {
            *col = forced[k];
            done = true;
        }
        const char *ot = sqlite3_column_table_name(st, k), *oc = sqlite3_column_origin_name(st, k);
        const char *alias = sqlite3_column_name(st, k);
        bool item = items && items->nitems == n && items->items[k].known;
        if (!done && item) {
            col->type = items->items[k].type;
            col->nullable = items->items[k].nullable;
            done = true;
        }
        if (!done && ot && oc && sim_col_type(c, ot, oc, &col->type, &col->nullable)) {
            if (items && items->outer_join) col->nullable = true; /* NULL on the outer side */
            done = true;
        }
        if (!done) {
            sim_value v = {SIM_V_NULL, 0, 0, NULL, 0};
            if (!first && first_rc == SQLITE_ROW) sim_store_value_of(&v, sqlite3_column_value(st, k));
            value_type(first ? &first[k] : first_rc == SQLITE_ROW ? &v : NULL, &col->type);
            col->nullable = true;
            all_known = false;
        }
        if (!(forced && k < nforced)) {
            if (items && items->nitems == n && items->items[k].name[0])
                snprintf(names[k], SIM_NAME_MAX, "%s", items->items[k].name);
            else if (oc) snprintf(names[k], SIM_NAME_MAX, "%s", alias ? alias : oc);
            else if (items && items->nitems == n) names[k][0] = 0;
            else snprintf(names[k], SIM_NAME_MAX, "%s", alias ? alias : "");
            col->name = names[k];
        }
    }
    return all_known;
}

bool sim_result_columns(sqlite3 *c, sqlite3_stmt *st, const xl_result *items, sim_column *cols,
                        char (*names)[SIM_NAME_MAX], int n) {
    return column_meta(c, st, SQLITE_DONE, NULL, items, NULL, 0, cols, names, n);
}

void sim_result_columns_as(sqlite3 *c, sqlite3_stmt *st, const xl_result *items, const sim_value *first,
                           sim_column *cols, char (*names)[SIM_NAME_MAX], int n) {
    column_meta(c, st, first ? SQLITE_ROW : SQLITE_DONE, first, items, NULL, 0, cols, names, n);
}

int sim_emit_stmt(sim_session *s, sqlite3 *c, sqlite3_stmt *st, int first_rc, const xl_result *items,
                  const sim_column *forced, int nforced, const sim_sink *sink, bool in_proc, int64_t *rows,
                  mcdc_error *err, bool *aborted) {
    int n = sqlite3_column_count(st);
    *rows = 0;
    if (first_rc != SQLITE_ROW && first_rc != SQLITE_DONE) return sim_sqlite_err(c, first_rc, err);
    if (n > MCDC_COLUMNS_MAX) return mcdc_error_set(err, MCDC_E_LIMIT, "result has more than %d columns", MCDC_COLUMNS_MAX);
    sim_column *cols = mcdc_calloc((size_t)n + 1, sizeof *cols);
    sim_value *vals = mcdc_calloc((size_t)n + 1, sizeof *vals);
    char (*names)[SIM_NAME_MAX] = mcdc_calloc((size_t)n + 1, SIM_NAME_MAX);
    if (!cols || !vals || !names) {
        mcdc_free(cols); mcdc_free(vals); mcdc_free(names);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    column_meta(c, st, first_rc, NULL, items, forced, nforced, cols, names, n);
    int rc = MCDC_OK;
    if (sink->columns && sink->columns(sink->ctx, cols, n)) *aborted = true;
    int step = first_rc;
    int64_t cnt = 0;
    while (!*aborted && step == SQLITE_ROW) {
        for (int k = 0; k < n; k++) {
            /* sqlite3_value_* on the column's value: cheaper per cell than
             * the sqlite3_column_* wrappers (the hot loop of every read) */
            sim_store_value_of(&vals[k], sqlite3_column_value(st, k));
        }
        cnt++;
        if (sink->row && sink->row(sink->ctx, vals, n)) { *aborted = true; break; }
        step = sqlite3_step(st);
    }
    /* an error after rows: the caller sends ERROR + DONE(error), as SQL Server */
    if (!*aborted && step != SQLITE_DONE && step != SQLITE_ROW) rc = sim_sqlite_err(c, step, err);
    (void)s;
    (void)in_proc;
    *rows = cnt;
    mcdc_free(cols);
    mcdc_free(vals);
    mcdc_free(names);
    return rc;
}

int sim_send_done(sim_stmt *x, int64_t rows, bool has_count, bool error) {
    if (x->sink->done && x->sink->done(x->sink->ctx, rows, has_count && !x->s->nocount, x->in_proc, error))
        x->aborted = true;
    return MCDC_OK;
}

int sim_send_error(sim_stmt *x, const mcdc_error *err, int line) {
    int num = err->server_number ? err->server_number : 50000;
    int cls = err->server_class ? err->server_class : 16;
    if (x->sink->message &&
        x->sink->message(x->sink->ctx, true, num, err->server_state ? err->server_state : 1, cls, err->message, "", line))
        x->aborted = true;
    /* a DMV read without VIEW ... STATE: SQL Server follows 262 with 297 */
    if (num == 262 && strstr(err->message, "STATE permission denied") && x->sink->message && !x->aborted &&
        x->sink->message(x->sink->ctx, true, 297, 1, 16, "The user does not have permission to perform this action.", "", line))
        x->aborted = true;
    return sim_send_done(x, 0, false, true);
}

int sim_send_info(sim_stmt *x, int number, const char *text) {
    if (x->sink->message && x->sink->message(x->sink->ctx, false, number, 1, 0, text, "", 1)) x->aborted = true;
    return MCDC_OK;
}
