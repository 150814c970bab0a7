/*
 * sim_faults.c - injected faults (EXEC sim.fault): drop a connection
 * after rows or at a query, delay, stall, refuse logins, fail capture scans.
 */
#include "sim_engine_int.h"

#include <string.h>

/* ---- faults -------------------------------------------------------------- */
int sim_fault_add(sim_server *srv, uint64_t setter_serial, const char *kind, int count, int ms, int times, mcdc_error *err) {
    fault_kind k;
    if (mcdc_str_ieq(kind, "drop_after_rows")) k = FAULT_DROP_AFTER_ROWS;
    else if (mcdc_str_ieq(kind, "drop_at_query")) k = FAULT_DROP_AT_QUERY;
    else if (mcdc_str_ieq(kind, "delay")) k = FAULT_DELAY;
    else if (mcdc_str_ieq(kind, "stall")) k = FAULT_STALL;
    else if (mcdc_str_ieq(kind, "refuse_login")) k = FAULT_REFUSE_LOGIN;
    else if (mcdc_str_ieq(kind, "capture_error")) k = FAULT_CAPTURE_ERROR;
    else return sim_err(err, 50000, "sim.fault: unknown @kind '%s' (drop_after_rows, drop_at_query, delay, stall,"
                                    " refuse_login, capture_error)", kind);
    pthread_mutex_lock(&srv->mu);
    if (srv->nfaults >= SIM_FAULTS_MAX) {
        pthread_mutex_unlock(&srv->mu);
        return sim_err(err, 50000, "sim.fault: more than %d faults set; EXEC sim.clear_faults first", SIM_FAULTS_MAX);
    }
    sim_fault *f = &srv->faults[srv->nfaults++];
    memset(f, 0, sizeof *f);
    f->kind = k;
    f->count = count;
    f->ms = ms;
    f->times = times > 0 ? times : 1;
    f->setter_serial = setter_serial;
    pthread_mutex_unlock(&srv->mu);
    return MCDC_OK;
}

void sim_fault_clear(sim_server *srv) {
    pthread_mutex_lock(&srv->mu);
    srv->nfaults = 0;
    pthread_mutex_unlock(&srv->mu);
}

static void fault_fired(sim_server *srv, int k) {
    if (--srv->faults[k].times <= 0) {
        memmove(&srv->faults[k], &srv->faults[k + 1], (size_t)(srv->nfaults - k - 1) * sizeof srv->faults[0]);
        srv->nfaults--;
    }
}

bool sim_fault_capture_error(sim_server *srv, int *number) {
    for (int k = 0; k < srv->nfaults; k++) {
        if (srv->faults[k].kind != FAULT_CAPTURE_ERROR) continue;
        *number = srv->faults[k].count > 0 ? srv->faults[k].count : 22859;
        fault_fired(srv, k);
        return true;
    }
    return false;
}

void sim_fault_check(sim_server *srv, sim_session *s, sim_fault_point point, sim_fault_action *out) {
    memset(out, 0, sizeof *out);
    if (point == SIM_FAULT_QUERY && s) s->req_rows = 0;
    if (srv->nfaults == 0) {
        /* no fault set: the per-row call must not take the server mutex */
        if (point == SIM_FAULT_ROW && s) s->req_rows++;
        return;
    }
    pthread_mutex_lock(&srv->mu);
    uint64_t serial = s ? s->serial : 0;
    for (int k = 0; k < srv->nfaults; k++) {
        sim_fault *f = &srv->faults[k];
        if (serial && f->setter_serial == serial) continue;
        bool fire = false;
        switch (point) {
        case SIM_FAULT_LOGIN:
            if (f->kind == FAULT_REFUSE_LOGIN) { out->refuse_login = true; fire = true; }
            break;
        case SIM_FAULT_QUERY:
            if (f->kind == FAULT_DROP_AT_QUERY) {
                f->seen++;
                if (f->seen >= (f->count > 0 ? f->count : 1)) { out->drop_connection = true; fire = true; f->seen = 0; }
            } else if (f->kind == FAULT_DELAY) { out->delay_ms = f->ms; fire = true; }
            else if (f->kind == FAULT_STALL) { out->stall_ms = f->ms; fire = true; }
            break;
        case SIM_FAULT_ROW:
            if (f->kind == FAULT_DROP_AFTER_ROWS && s && s->req_rows >= f->count) { out->drop_connection = true; fire = true; }
            break;
        }
        if (fire) { fault_fired(srv, k); break; }
    }
    if (point == SIM_FAULT_ROW && s && !out->drop_connection) s->req_rows++;
    pthread_mutex_unlock(&srv->mu);
}
