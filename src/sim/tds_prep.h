/*
 * tds_prep.h - prepared statements of one connection (sp_prepare,
 * sp_prepexec, sp_execute, sp_unprepare), kept by the TDS layer: the engine
 * only ever sees sp_executesql. ODBC drivers (mssql-python, msodbcsql)
 * send parameterised queries as sp_prepexec and re-run them with sp_execute.
 */
#ifndef TDS_PREP_H
#define TDS_PREP_H

#include "tds_wire.h"

/* Statements one connection may keep prepared at once. */
#define TDS_PREPARED_MAX 4096

typedef struct sim_tds_prep_entry {
    int32_t handle;
    char *stmt;   /* owned, UTF-8, NUL-terminated */
    char *decl;   /* owned; "" when the statement has no parameters */
    size_t stmt_n, decl_n;
} sim_tds_prep_entry;

typedef struct sim_tds_prep {
    sim_tds_prep_entry *e; /* owned */
    int n, cap;
    int32_t next_handle;
    sim_param *params; /* owned scratch for the rewritten parameter list */
    int params_cap;
} sim_tds_prep;

typedef enum sim_tds_prep_action {
    TDS_PREP_PASS = 0, /* not a prepare-family RPC: run it as sent */
    TDS_PREP_EXEC,     /* run sp_executesql with the rewritten parameters */
    TDS_PREP_SKIP      /* nothing to run (sp_prepare, sp_unprepare) */
} sim_tds_prep_action;

/* Rewrites an RPC of the prepare family. On MCDC_OK: *action; for EXEC,
 * *params and *nparams (valid until the next call; values borrowed from rpc);
 * *handle_out >= 0 when the reply must carry that handle as RETURNVALUE.
 * MCDC_E_NOTFOUND for an unknown handle (SQL Server error 8179),
 * MCDC_E_INVALID for missing parameters, MCDC_E_LIMIT past TDS_PREPARED_MAX. */
int sim_tds_prep_rewrite(sim_tds_prep *p, const sim_tds_rpc *rpc, sim_tds_prep_action *action,
                     const sim_param **params, int *nparams, int32_t *handle_out,
                     mcdc_error *err);
void sim_tds_prep_free(sim_tds_prep *p);

#endif /* TDS_PREP_H */
