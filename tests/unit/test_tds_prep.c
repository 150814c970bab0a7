/* test_tds_prep.c - the TDS layer's prepared statements (sp_prepexec,
 * sp_execute, sp_prepare, sp_unprepare -> sp_executesql). */
#include <string.h>

#include "mcdc_test.h"
#include "tds_prep.h"

static sim_param P(const char *name, sim_value v) {
    return (sim_param){name, {SIM_T_NVARCHAR, 0, 0, -1}, v, false};
}
static sim_value S(const char *s) {
    return (sim_value){SIM_V_TEXT, 0, 0, (const uint8_t *)s, strlen(s)};
}
static sim_value I(int64_t i) { return (sim_value){SIM_V_INT, i, 0, NULL, 0}; }

TEST(sim_tds_prep_prepexec_execute_unprepare) {
    sim_tds_prep p = {0};
    sim_tds_rpc rpc = {0};
    sim_param in[4] = {P("@h", (sim_value){0}), P("@P1 int", S("@P1 int")),
                       P("", S("SELECT @P1")), P("@P1", I(5))};
    in[1].name = "";
    rpc.params = in;
    rpc.nparams = 4;
    rpc.proc_id = 13;
    strcpy(rpc.proc_name, "sp_prepexec");
    sim_tds_prep_action act;
    const sim_param *ps;
    int np;
    int32_t h;
    mcdc_error err = MCDC_ERROR_INIT;
    CHECK_EQ_INT(sim_tds_prep_rewrite(&p, &rpc, &act, &ps, &np, &h, &err), MCDC_OK);
    CHECK_EQ_INT(act, TDS_PREP_EXEC);
    CHECK_EQ_INT(h, 1);
    CHECK_EQ_INT(np, 3);
    CHECK_EQ_STR((const char *)ps[0].value.p, "SELECT @P1");
    CHECK_EQ_STR((const char *)ps[1].value.p, "@P1 int");
    CHECK_EQ_INT(ps[2].value.i, 5);

    /* sp_execute 1, 9 */
    sim_param ex[2] = {P("", I(1)), P("@P1", I(9))};
    rpc.params = ex;
    rpc.nparams = 2;
    rpc.proc_id = 0;
    strcpy(rpc.proc_name, "sp_execute");
    CHECK_EQ_INT(sim_tds_prep_rewrite(&p, &rpc, &act, &ps, &np, &h, &err), MCDC_OK);
    CHECK_EQ_INT(act, TDS_PREP_EXEC);
    CHECK_EQ_INT(h, -1);
    CHECK_EQ_STR((const char *)ps[0].value.p, "SELECT @P1");
    CHECK_EQ_INT(ps[2].value.i, 9);

    /* sp_unprepare 1, then sp_execute 1 fails like SQL Server (8179) */
    rpc.nparams = 1;
    rpc.proc_id = 15;
    CHECK_EQ_INT(sim_tds_prep_rewrite(&p, &rpc, &act, &ps, &np, &h, &err), MCDC_OK);
    CHECK_EQ_INT(act, TDS_PREP_SKIP);
    rpc.proc_id = 12;
    CHECK_EQ_INT(sim_tds_prep_rewrite(&p, &rpc, &act, &ps, &np, &h, &err), MCDC_E_NOTFOUND);
    CHECK(strstr(err.message, "handle 1") != NULL);

    /* other procedures pass through */
    rpc.proc_id = 10;
    CHECK_EQ_INT(sim_tds_prep_rewrite(&p, &rpc, &act, &ps, &np, &h, &err), MCDC_OK);
    CHECK_EQ_INT(act, TDS_PREP_PASS);
    /* sp_prepare without a statement */
    rpc.proc_id = 11;
    CHECK_EQ_INT(sim_tds_prep_rewrite(&p, &rpc, &act, &ps, &np, &h, &err), MCDC_E_INVALID);
    sim_tds_prep_free(&p);
}
