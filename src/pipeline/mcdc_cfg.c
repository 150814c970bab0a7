/* mcdc_cfg.c - the versions of the public configs: the bytes each version
 * holds, the defaults, the copy of a caller's struct and the public
 * mcdc_*_cfg_init functions. */
#include "mcdc_cfg.h"

#include <string.h>

#include "mssqlcdc.h"

/* Every version of a config has at most this many versions before it. */
#define CFG_VERSIONS_MAX 6
/* Reserved slots of a config (fields no longer used, kept in place). */
#define CFG_RESERVED_MAX 2

typedef struct {
    size_t at, bytes;
} cfg_span;

typedef struct {
    const char *name;   /* the C type, for messages */
    size_t size;        /* sizeof the newest layout */
    const void *defaults; /* the _INIT macro's value */
    int newest;         /* the _VERSION macro */
    const char *newest_name; /* its name */
    size_t bytes[CFG_VERSIONS_MAX]; /* [v - 1]: the bytes version v holds */
    cfg_span reserved[CFG_RESERVED_MAX]; /* must stay zero */
} cfg_layout;

static const mcdc_stream_cfg STREAM_DEFAULTS = MCDC_STREAM_CFG_INIT;
static const mcdc_snapshot_cfg SNAPSHOT_DEFAULTS = MCDC_SNAPSHOT_CFG_INIT;
static const mcdc_seed_cfg SEED_DEFAULTS = MCDC_SEED_CFG_INIT;
static const mcdc_backfill_cfg BACKFILL_DEFAULTS = MCDC_BACKFILL_CFG_INIT;
static const mcdc_apply_cfg APPLY_DEFAULTS = MCDC_APPLY_CFG_INIT;
static const mcdc_reconcile_cfg RECONCILE_DEFAULTS = MCDC_RECONCILE_CFG_INIT;
static const mcdc_repair_cfg REPAIR_DEFAULTS = MCDC_REPAIR_CFG_INIT;
static const mcdc_runtime_cfg RUNTIME_DEFAULTS = MCDC_RUNTIME_CFG_INIT;

/* A version added to a config adds its end here (the offset of its first
 * field closes the version before it) and moves the assertion below. */
_Static_assert(MCDC_STREAM_CFG_VERSION == 6 && MCDC_SNAPSHOT_CFG_VERSION == 5 &&
                   MCDC_SEED_CFG_VERSION == 5 && MCDC_BACKFILL_CFG_VERSION == 3 &&
                   MCDC_APPLY_CFG_VERSION == 6 && MCDC_RECONCILE_CFG_VERSION == 5 &&
                   MCDC_REPAIR_CFG_VERSION == 3 && MCDC_RUNTIME_CFG_VERSION == 1,
               "a new config version needs its end in LAYOUTS");

#define SPAN(type, field) {offsetof(type, field), sizeof(((type *)0)->field)}
#define LAYOUT(type, defaults, newest) #type, sizeof(type), &defaults, newest, #newest

static const cfg_layout LAYOUTS[MCDC_CFG_KINDS] = {
    [MCDC_CFG_STREAM] = {LAYOUT(mcdc_stream_cfg, STREAM_DEFAULTS, MCDC_STREAM_CFG_VERSION),
                         {offsetof(mcdc_stream_cfg, budget),
                          offsetof(mcdc_stream_cfg, on_data_loss),
                          offsetof(mcdc_stream_cfg, snapshot_on_switch),
                          offsetof(mcdc_stream_cfg, progress_fn),
                          offsetof(mcdc_stream_cfg, runtime), sizeof(mcdc_stream_cfg)},
                         {SPAN(mcdc_stream_cfg, reserved1), SPAN(mcdc_stream_cfg, reserved2)}},
    [MCDC_CFG_SNAPSHOT] = {LAYOUT(mcdc_snapshot_cfg, SNAPSHOT_DEFAULTS, MCDC_SNAPSHOT_CFG_VERSION),
                           {offsetof(mcdc_snapshot_cfg, app_id),
                            offsetof(mcdc_snapshot_cfg, progress_fn),
                            offsetof(mcdc_snapshot_cfg, stop),
                            offsetof(mcdc_snapshot_cfg, runtime), sizeof(mcdc_snapshot_cfg)},
                           {{0, 0}}},
    [MCDC_CFG_SEED] = {LAYOUT(mcdc_seed_cfg, SEED_DEFAULTS, MCDC_SEED_CFG_VERSION),
                       {offsetof(mcdc_seed_cfg, allow_empty),
                        offsetof(mcdc_seed_cfg, progress_fn), offsetof(mcdc_seed_cfg, stop),
                        offsetof(mcdc_seed_cfg, runtime), sizeof(mcdc_seed_cfg)},
                       {{0, 0}}},
    [MCDC_CFG_BACKFILL] = {LAYOUT(mcdc_backfill_cfg, BACKFILL_DEFAULTS, MCDC_BACKFILL_CFG_VERSION),
                           {offsetof(mcdc_backfill_cfg, progress_fn),
                            offsetof(mcdc_backfill_cfg, runtime), sizeof(mcdc_backfill_cfg)},
                           {SPAN(mcdc_backfill_cfg, reserved1)}},
    [MCDC_CFG_APPLY] = {LAYOUT(mcdc_apply_cfg, APPLY_DEFAULTS, MCDC_APPLY_CFG_VERSION),
                        {offsetof(mcdc_apply_cfg, scd_type),
                         offsetof(mcdc_apply_cfg, deletion_vectors),
                         offsetof(mcdc_apply_cfg, progress_fn),
                         offsetof(mcdc_apply_cfg, scratch_dir),
                         offsetof(mcdc_apply_cfg, runtime), sizeof(mcdc_apply_cfg)},
                        {SPAN(mcdc_apply_cfg, reserved1)}},
    [MCDC_CFG_RECONCILE] = {LAYOUT(mcdc_reconcile_cfg, RECONCILE_DEFAULTS,
                                   MCDC_RECONCILE_CFG_VERSION),
                            {offsetof(mcdc_reconcile_cfg, repair),
                             offsetof(mcdc_reconcile_cfg, settle_seconds),
                             offsetof(mcdc_reconcile_cfg, progress_fn),
                             offsetof(mcdc_reconcile_cfg, runtime), sizeof(mcdc_reconcile_cfg)},
                            {SPAN(mcdc_reconcile_cfg, reserved1)}},
    [MCDC_CFG_REPAIR] = {LAYOUT(mcdc_repair_cfg, REPAIR_DEFAULTS, MCDC_REPAIR_CFG_VERSION),
                         {offsetof(mcdc_repair_cfg, stop), offsetof(mcdc_repair_cfg, runtime),
                          sizeof(mcdc_repair_cfg)},
                         {SPAN(mcdc_repair_cfg, reserved1)}},
    [MCDC_CFG_RUNTIME] = {LAYOUT(mcdc_runtime_cfg, RUNTIME_DEFAULTS, MCDC_RUNTIME_CFG_VERSION),
                          {sizeof(mcdc_runtime_cfg)},
                          {{0, 0}}},
};

/* Every config starts with its int version. */
_Static_assert(offsetof(mcdc_stream_cfg, version) == 0 && offsetof(mcdc_apply_cfg, version) == 0 &&
                   offsetof(mcdc_snapshot_cfg, version) == 0 &&
                   offsetof(mcdc_seed_cfg, version) == 0 &&
                   offsetof(mcdc_backfill_cfg, version) == 0 &&
                   offsetof(mcdc_reconcile_cfg, version) == 0 &&
                   offsetof(mcdc_repair_cfg, version) == 0 &&
                   offsetof(mcdc_runtime_cfg, version) == 0,
               "a config's version is its first field");

size_t mcdc_cfg_version_bytes(mcdc_cfg_kind kind, int version) {
    MCDC_ASSERT(kind >= 0 && kind < MCDC_CFG_KINDS);
    const cfg_layout *l = &LAYOUTS[kind];
    if (version < 1 || version > l->newest) return 0;
    size_t n = l->bytes[version - 1];
    MCDC_ASSERT(n > sizeof(int) && n <= l->size);
    MCDC_ASSERT(version == 1 || n > l->bytes[version - 2]);
    MCDC_ASSERT(version < l->newest || n == l->size);
    return n;
}

static int unknown_version(const cfg_layout *l, int version, mcdc_error *err) {
    return mcdc_error_set(err, MCDC_E_INVALID,
                          "%s version %d is not one this library knows (1..%d): set it to "
                          "%s of the header the program was built with (the _INIT macro or "
                          "%s_init does)",
                          l->name, version, l->newest, l->newest_name, l->name);
}

int mcdc_cfg_copy(void *out, size_t out_size, mcdc_cfg_kind kind, const void *cfg,
                  mcdc_error *err) {
    MCDC_ASSERT(out && cfg && kind >= 0 && kind < MCDC_CFG_KINDS);
    const cfg_layout *l = &LAYOUTS[kind];
    MCDC_ASSERT(out_size == l->size);
    int version;
    memcpy(&version, cfg, sizeof version);
    size_t n = mcdc_cfg_version_bytes(kind, version);
    if (n == 0) return unknown_version(l, version, err);
    for (int i = 0; i < CFG_RESERVED_MAX; i++) {
        const cfg_span *r = &l->reserved[i];
        if (r->bytes == 0 || r->at + r->bytes > n) continue;
        const unsigned char *p = (const unsigned char *)cfg + r->at;
        for (size_t k = 0; k < r->bytes; k++)
            if (p[k] != 0)
                return mcdc_error_set(err, MCDC_E_INVALID,
                                      "%s: the reserved field at byte %zu is set; leave it zero "
                                      "(the test hooks that were there are set with "
                                      "mcdc_opts_set_crash_at, mssqlcdc_testing.h)",
                                      l->name, r->at);
    }
    memcpy(out, l->defaults, l->size);
    memcpy(out, cfg, n);
    return MCDC_OK;
}

/* ---- sized results ---------------------------------------------------------------- */

typedef struct {
    const char *name;   /* the C type, for messages */
    size_t size;        /* sizeof the newest layout */
    size_t first;       /* the bytes of the first sized version's fields (API version 6) */
} result_layout;

#define FIELD_END(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

/* A field added to a result is appended; its first version's end stays. */
static const result_layout RESULTS[MCDC_RESULT_KINDS] = {
    [MCDC_RESULT_APPLY] = {"mcdc_apply_result", sizeof(mcdc_apply_result),
                           FIELD_END(mcdc_apply_result, snapshot_wave)},
    [MCDC_RESULT_BACKFILL] = {"mcdc_backfill_status", sizeof(mcdc_backfill_status),
                              FIELD_END(mcdc_backfill_status, reason)},
    [MCDC_RESULT_RECONCILE] = {"mcdc_reconcile_result", sizeof(mcdc_reconcile_result),
                               FIELD_END(mcdc_reconcile_result, rechecks)},
    [MCDC_RESULT_REPAIR] = {"mcdc_repair_result", sizeof(mcdc_repair_result),
                            FIELD_END(mcdc_repair_result, already)},
};

/* Every result starts with its size_t size. */
_Static_assert(offsetof(mcdc_apply_result, size) == 0 &&
                   offsetof(mcdc_backfill_status, size) == 0 &&
                   offsetof(mcdc_reconcile_result, size) == 0 &&
                   offsetof(mcdc_repair_result, size) == 0,
               "a result's size is its first field");

static size_t result_size(const void *caller) {
    size_t n;
    memcpy(&n, caller, sizeof n);
    return n;
}

int mcdc_result_check(mcdc_result_kind kind, const void *caller, const char *what,
                      mcdc_error *err) {
    MCDC_ASSERT(kind >= 0 && kind < MCDC_RESULT_KINDS && caller != NULL);
    const result_layout *l = &RESULTS[kind];
    size_t n = result_size(caller);
    if (n < l->first)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "%s: the %s's size is %zu, below the %zu bytes of its first "
                              "version: set its size field to sizeof(%s) before the call",
                              what, l->name, n, l->first, l->name);
    return MCDC_OK;
}

void mcdc_result_out(mcdc_result_kind kind, void *caller, const void *full) {
    MCDC_ASSERT(kind >= 0 && kind < MCDC_RESULT_KINDS && caller != NULL && full != NULL);
    const result_layout *l = &RESULTS[kind];
    size_t n = result_size(caller);
    MCDC_ASSERT(n >= l->first);
    if (n > l->size) n = l->size;
    memcpy((char *)caller + sizeof n, (const char *)full + sizeof n, n - sizeof n);
}

int mcdc_result_in(mcdc_result_kind kind, void *full, const void *caller, const char *what,
                   mcdc_error *err) {
    int rc = mcdc_result_check(kind, caller, what, err);
    if (rc) return rc;
    const result_layout *l = &RESULTS[kind];
    size_t n = result_size(caller);
    if (n > l->size) n = l->size;
    memset(full, 0, l->size);
    memcpy(full, caller, n);
    memcpy(full, &l->size, sizeof l->size);
    return MCDC_OK;
}

/* The defaults of version, its bytes only. */
static int cfg_init(void *out, mcdc_cfg_kind kind, int version, mcdc_error *err) {
    const cfg_layout *l = &LAYOUTS[kind];
    if (out == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "%s_init: out is NULL", l->name);
    size_t n = mcdc_cfg_version_bytes(kind, version);
    if (n == 0) return unknown_version(l, version, err);
    memcpy(out, l->defaults, n);
    memcpy(out, &version, sizeof version);
    return MCDC_OK;
}

int mcdc_stream_cfg_init(mcdc_stream_cfg *out, int version, mcdc_error *err) {
    return cfg_init(out, MCDC_CFG_STREAM, version, err);
}

int mcdc_snapshot_cfg_init(mcdc_snapshot_cfg *out, int version, mcdc_error *err) {
    return cfg_init(out, MCDC_CFG_SNAPSHOT, version, err);
}

int mcdc_seed_cfg_init(mcdc_seed_cfg *out, int version, mcdc_error *err) {
    return cfg_init(out, MCDC_CFG_SEED, version, err);
}

int mcdc_backfill_cfg_init(mcdc_backfill_cfg *out, int version, mcdc_error *err) {
    return cfg_init(out, MCDC_CFG_BACKFILL, version, err);
}

int mcdc_apply_cfg_init(mcdc_apply_cfg *out, int version, mcdc_error *err) {
    return cfg_init(out, MCDC_CFG_APPLY, version, err);
}

int mcdc_reconcile_cfg_init(mcdc_reconcile_cfg *out, int version, mcdc_error *err) {
    return cfg_init(out, MCDC_CFG_RECONCILE, version, err);
}

int mcdc_repair_cfg_init(mcdc_repair_cfg *out, int version, mcdc_error *err) {
    return cfg_init(out, MCDC_CFG_REPAIR, version, err);
}

int mcdc_runtime_cfg_init(mcdc_runtime_cfg *out, int version, mcdc_error *err) {
    return cfg_init(out, MCDC_CFG_RUNTIME, version, err);
}
