/* mcdc_runtime.c - the runtime the jobs of one host share (mcdc_runtime.h):
 * its allocator accounting, its budget and its default log sink. */
#include "mcdc_runtime.h"

#include <stdatomic.h>

#include "mcdc_cfg.h"
#include "mssqlcdc_testing.h"

struct mcdc_runtime {
    mcdc_alloc_acct acct;       /* what its jobs hold; the handle itself is outside it */
    mcdc_runtime_cfg cfg;
    mcdc_budget *budget;        /* owned; NULL: no limit */
};

int mcdc_runtime_create(mcdc_runtime **out, const mcdc_runtime_cfg *cfg, mcdc_error *err) {
    if (out == NULL) return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_runtime_create: out is NULL");
    *out = NULL;
    mcdc_runtime_cfg given = MCDC_RUNTIME_CFG_INIT;
    int rc = cfg ? mcdc_cfg_copy(&given, sizeof given, MCDC_CFG_RUNTIME, cfg, err) : MCDC_OK;
    if (rc) return rc;
    if (given.connections_max < 0 || given.encoder_threads_max < 0 ||
        given.memory_bytes_max < 0 || given.probe_interval_ms < 0)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "a runtime's connections (%d), encoder threads (%d), memory "
                              "(%lld bytes) and probe interval (%lld ms) cannot be negative: "
                              "0 means no limit (the default interval)",
                              given.connections_max, given.encoder_threads_max,
                              (long long)given.memory_bytes_max,
                              (long long)given.probe_interval_ms);
    /* The handle is the host's, not its jobs': charged to no runtime. */
    mcdc_alloc_acct *host = mcdc_alloc_bind(NULL);
    mcdc_runtime *rt = mcdc_calloc(1, sizeof *rt);
    mcdc_alloc_bind(host);
    if (rt == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    mcdc_alloc_acct_init(&rt->acct, given.memory_bytes_max);
    rt->cfg = given;
    if (rt->cfg.probe_interval_ms == 0) rt->cfg.probe_interval_ms = 10;
    if (given.connections_max > 0 || given.encoder_threads_max > 0) {
        /* A limit on one kind only: the other as good as unlimited. */
        int conns = given.connections_max > 0 ? given.connections_max : 1 << 20;
        int enc = given.encoder_threads_max > 0 ? given.encoder_threads_max : 1 << 20;
        host = mcdc_alloc_bind(NULL);
        rc = mcdc_budget_create(&rt->budget, conns, enc, err);
        mcdc_alloc_bind(host);
        if (rc) {
            mcdc_runtime_destroy(rt);
            return mcdc_error_wrap(err, "creating the runtime's budget");
        }
    }
    *out = rt;
    return MCDC_OK;
}

void mcdc_runtime_destroy(mcdc_runtime *rt) {
    if (rt == NULL) return;
    mcdc_budget_free(rt->budget);
    mcdc_free(rt);
}

void mcdc_runtime_get_stats(const mcdc_runtime *rt, mcdc_runtime_stats *out) {
    MCDC_ASSERT(rt != NULL && out != NULL);
    mcdc_alloc_stats a;
    mcdc_alloc_acct_stats(&rt->acct, &a);
    *out = (mcdc_runtime_stats){a.calls, a.live_bytes, a.peak_bytes, 0, 0};
}

void mcdc_runtime_fail_alloc_at(mcdc_runtime *rt, int64_t nth) {
    MCDC_ASSERT(rt != NULL);
    mcdc_alloc_acct_fail_at(&rt->acct, nth);
}

mcdc_alloc_acct *mcdc_runtime_acct_or_bound(mcdc_runtime *rt) {
    return rt ? &rt->acct : mcdc_alloc_bound();
}

mcdc_budget *mcdc_runtime_budget_or(mcdc_runtime *rt, mcdc_budget *own) {
    return own ? own : rt ? rt->budget : NULL;
}

mcdc_log_fn mcdc_runtime_log_fn(const mcdc_runtime *rt, void **user) {
    *user = rt ? rt->cfg.log_user : NULL;
    return rt ? rt->cfg.log_fn : NULL;
}
