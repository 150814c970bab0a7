/* sim_work.c - workload generator and bulk loader (see sim_engine_int.h). */
#include "sim_engine_int.h"

int sim_work_start(sim_session *s, const sim_proc_args *a, mcdc_error *err) {
    (void)s; (void)a;
    return sim_err(err, 50000, "sim.workload is not implemented yet");
}

int sim_work_bulk_load(sim_session *s, const sim_proc_args *a, int64_t *rows, mcdc_error *err) {
    (void)s; (void)a;
    *rows = 0;
    return sim_err(err, 50000, "sim.bulk_load is not implemented yet");
}

void sim_work_stop_all(sim_server *srv) { (void)srv; }
