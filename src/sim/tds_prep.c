/*
 * tds_prep.c - prepared statements of one connection. See tds_prep.h.
 */
#include "tds_prep.h"

#include <string.h>

void sim_tds_prep_free(sim_tds_prep *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) {
        mcdc_free(p->e[i].stmt);
        mcdc_free(p->e[i].decl);
    }
    mcdc_free(p->e);
    mcdc_free(p->params);
    memset(p, 0, sizeof *p);
}

static int which(const sim_tds_rpc *rpc) {
    if (rpc->proc_id) return rpc->proc_id;
    const char *n = rpc->proc_name;
    if (mcdc_str_nieq(n, "sys.", 4)) n += 4;
    if (mcdc_str_ieq(n, "sp_prepare")) return 11;
    if (mcdc_str_ieq(n, "sp_execute")) return 12;
    if (mcdc_str_ieq(n, "sp_prepexec")) return 13;
    if (mcdc_str_ieq(n, "sp_unprepare")) return 15;
    return 0;
}

static bool text_of(const sim_param *pa) {
    return pa->value.kind == SIM_V_TEXT || pa->value.kind == SIM_V_NULL;
}

static int find(const sim_tds_prep *p, int32_t h) {
    for (int i = 0; i < p->n; i++)
        if (p->e[i].handle == h) return i;
    return -1;
}

static int get_handle(const sim_tds_rpc *rpc, int32_t *h, mcdc_error *err) {
    if (rpc->nparams < 1 || rpc->params[0].value.kind != SIM_V_INT)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "%s expects the statement handle as its first parameter",
                              rpc->proc_name);
    *h = (int32_t)rpc->params[0].value.i;
    return MCDC_OK;
}

static int store(sim_tds_prep *p, const sim_param *decl, const sim_param *stmt, int32_t *h,
                 mcdc_error *err) {
    if (p->n >= TDS_PREPARED_MAX)
        return mcdc_error_set(err, MCDC_E_LIMIT,
                              "more than %d prepared statements on one connection; "
                              "unprepare some (sp_unprepare)",
                              TDS_PREPARED_MAX);
    if (p->n == p->cap) {
        int cap = p->cap ? p->cap * 2 : 8;
        sim_tds_prep_entry *ne = mcdc_realloc(p->e, (size_t)cap * sizeof *ne);
        if (!ne) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory preparing a statement");
        p->e = ne;
        p->cap = cap;
    }
    sim_tds_prep_entry *e = &p->e[p->n];
    e->stmt_n = stmt->value.kind == SIM_V_TEXT ? stmt->value.n : 0;
    e->decl_n = decl->value.kind == SIM_V_TEXT ? decl->value.n : 0;
    e->stmt = mcdc_strndup(e->stmt_n ? (const char *)stmt->value.p : "", e->stmt_n);
    e->decl = mcdc_strndup(e->decl_n ? (const char *)decl->value.p : "", e->decl_n);
    if (!e->stmt || !e->decl) {
        mcdc_free(e->stmt);
        mcdc_free(e->decl);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory preparing a statement");
    }
    if (p->next_handle < 1) p->next_handle = 1;
    e->handle = p->next_handle++;
    *h = e->handle;
    p->n++;
    return MCDC_OK;
}

static int build(sim_tds_prep *p, const sim_tds_prep_entry *e, const sim_param *vals, int nvals,
                 const sim_param **out, int *nout, mcdc_error *err) {
    int need = nvals + 2;
    if (need > p->params_cap) {
        sim_param *np = mcdc_realloc(p->params, (size_t)need * sizeof *np);
        if (!np) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory for RPC parameters");
        p->params = np;
        p->params_cap = need;
    }
    sim_param *q = p->params;
    q[0] = (sim_param){"@stmt", {SIM_T_NVARCHAR, 0, 0, -1},
                       {SIM_V_TEXT, 0, 0, (const uint8_t *)e->stmt, e->stmt_n}, false};
    int n = 1;
    if (e->decl_n || nvals) {
        q[1] = (sim_param){"@params", {SIM_T_NVARCHAR, 0, 0, -1},
                           {SIM_V_TEXT, 0, 0, (const uint8_t *)e->decl, e->decl_n}, false};
        n = 2;
        for (int i = 0; i < nvals; i++) q[n++] = vals[i];
    }
    *out = q;
    *nout = n;
    return MCDC_OK;
}

int sim_tds_prep_rewrite(sim_tds_prep *p, const sim_tds_rpc *rpc, sim_tds_prep_action *action,
                     const sim_param **params, int *nparams, int32_t *handle_out,
                     mcdc_error *err) {
    *action = TDS_PREP_PASS;
    *params = NULL;
    *nparams = 0;
    *handle_out = -1;
    int id = which(rpc);
    int32_t h = 0;
    int rc, i;
    switch (id) {
    case 11: /* sp_prepare @handle OUTPUT, @params, @stmt [, @options] */
    case 13: /* sp_prepexec @handle OUTPUT, @params, @stmt, values... */
        if (rpc->nparams < 3 || !text_of(&rpc->params[1]) || rpc->params[2].value.kind != SIM_V_TEXT)
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "%s expects @handle OUTPUT, @params and @stmt",
                                  rpc->proc_name);
        if ((rc = store(p, &rpc->params[1], &rpc->params[2], &h, err))) return rc;
        *handle_out = h;
        if (id == 11) {
            *action = TDS_PREP_SKIP;
            return MCDC_OK;
        }
        *action = TDS_PREP_EXEC;
        return build(p, &p->e[p->n - 1], rpc->params + 3, rpc->nparams - 3, params, nparams,
                     err);
    case 12: /* sp_execute @handle, values... */
        if ((rc = get_handle(rpc, &h, err))) return rc;
        if ((i = find(p, h)) < 0)
            return mcdc_error_set(err, MCDC_E_NOTFOUND,
                                  "Could not find prepared statement with handle %d.", (int)h);
        *action = TDS_PREP_EXEC;
        return build(p, &p->e[i], rpc->params + 1, rpc->nparams - 1, params, nparams, err);
    case 15: /* sp_unprepare @handle */
        if ((rc = get_handle(rpc, &h, err))) return rc;
        if ((i = find(p, h)) < 0)
            return mcdc_error_set(err, MCDC_E_NOTFOUND,
                                  "Could not find prepared statement with handle %d.", (int)h);
        mcdc_free(p->e[i].stmt);
        mcdc_free(p->e[i].decl);
        p->e[i] = p->e[--p->n];
        *action = TDS_PREP_SKIP;
        return MCDC_OK;
    default: return MCDC_OK;
    }
}
