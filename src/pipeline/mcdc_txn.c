/* mcdc_txn.c - the txn app ids mssql-cdc writes (see mcdc_txn.h). */
#include "mcdc_txn.h"

#include <stdio.h>
#include <string.h>

#include "mcdc_lsn.h"

static const mcdc_txn_entry TXNS[MCDC_TXN_KIND_COUNT] = {
    {MCDC_TXN_STREAM, "", true, true, "", false, "bronze", "stream", "the batch id"},
    {MCDC_TXN_STREAM_FACTS, "", true, true, "#facts", false, "facts", "stream", "the batch id"},
    {MCDC_TXN_EVENTS, "", true, false, "#events", false, "facts",
     "bootstrap, seed, re-snapshot, backfill's completion",
     "the generation (0: the bootstrap's)"},
    {MCDC_TXN_SNAPSHOTS, "", true, false, "#snapshots", false, "facts",
     "a chunked snapshot's open", "the generation"},
    {MCDC_TXN_SNAPOPEN, "", true, false, "#snapopen.", true, "plans, facts",
     "a chunked snapshot's open, a switch's open", "0 (once per S)"},
    {MCDC_TXN_SNAPPLAN, "", true, false, "#snapplan.", true, "plans, facts", "backfill",
     "0 (once per S)"},
    {MCDC_TXN_SNAPCHUNKS, "", true, false, "#snapchunks.", true, "plans, facts", "backfill",
     "the wave"},
    {MCDC_TXN_SNAP, "", true, false, "#snap.", true, "bronze", "backfill", "the wave"},
    {MCDC_TXN_SNAPDONE, "", true, false, "#snapdone.", true, "facts",
     "a switch's snapshot completion", "0 (once per S)"},
    {MCDC_TXN_APPLY, "mssql-cdc.apply", false, false, "", false, "silver", "apply", "the pass"},
    {MCDC_TXN_REPAIR, "mssql-cdc.repair.", true, false, "", false, "bronze", "repair", "0"},
    {MCDC_TXN_REPAIR_FACTS, "mssql-cdc.repair.", true, false, "#facts", false, "facts", "repair",
     "0"},
    {MCDC_TXN_RECONCILE, "mssql-cdc.reconcile.", true, false, "", false, "the report table",
     "reconcile", "1 (a report), 2 (a report whose run goes on to repair)"},
};

const mcdc_txn_entry *mcdc_txn_entry_of(mcdc_txn_kind k) {
    MCDC_ASSERT(k >= 0 && k < MCDC_TXN_KIND_COUNT && TXNS[k].kind == k);
    return &TXNS[k];
}

const char *mcdc_txn_fixed(mcdc_txn_kind k) {
    const mcdc_txn_entry *e = mcdc_txn_entry_of(k);
    MCDC_ASSERT(!e->base && !e->generation && !e->arg && e->suffix[0] == 0);
    return e->prefix;
}

int mcdc_txn_app_id(char *out, size_t cap, mcdc_txn_kind k, const char *base, int64_t generation,
                    const char *arg, mcdc_error *err) {
    const mcdc_txn_entry *e = mcdc_txn_entry_of(k);
    MCDC_ASSERT(out && cap > 0 && (base != NULL) == e->base && (arg != NULL) == e->arg);
    MCDC_ASSERT(generation >= 0 && (e->generation || generation == 0));
    char gen[24] = "";
    if (generation > 0) snprintf(gen, sizeof gen, ".g%lld", (long long)generation);
    int n = snprintf(out, cap, "%s%s%s%s%s", e->prefix, base ? base : "", gen, e->suffix,
                     arg ? arg : "");
    if (n < 0 || (size_t)n >= cap) {
        out[0] = 0;
        return mcdc_error_set(err, MCDC_E_LIMIT, "the txn app id of %s%s is longer than %zu bytes",
                              base ? base : e->prefix, e->suffix, cap - 1);
    }
    return MCDC_OK;
}

/* Whether text[0..len) starts with s; then *at moves past it. */
static bool eat(const char **at, const char *end, const char *s) {
    size_t n = strlen(s);
    if ((size_t)(end - *at) < n || memcmp(*at, s, n) != 0) return false;
    *at += n;
    return true;
}

bool mcdc_txn_match(const char *text, size_t len, mcdc_txn_kind k, const char *base,
                    int64_t *generation, const char **arg, size_t *arg_len) {
    const mcdc_txn_entry *e = mcdc_txn_entry_of(k);
    MCDC_ASSERT((base != NULL) == e->base);
    const char *at = text, *end = text + len;
    if (generation) *generation = 0;
    if (arg) *arg = NULL;
    if (arg_len) *arg_len = 0;
    if (!eat(&at, end, e->prefix) || (base && !eat(&at, end, base))) return false;
    /* ".g<digits>": a generation from 1 on, then the suffix */
    int64_t g = 0;
    if (e->generation && end - at >= 3 && at[0] == '.' && at[1] == 'g' && at[2] >= '1' &&
        at[2] <= '9') {
        const char *p = at + 2;
        while (p < end && *p >= '0' && *p <= '9' && g <= (INT64_MAX - 9) / 10) g = g * 10 + (*p++ - '0');
        if (p < end && *p >= '0' && *p <= '9') return false; /* too long */
        at = p;
    }
    if (!eat(&at, end, e->suffix)) return false;
    if (e->arg) {
        /* an LSN text: "0x" and 20 hex digits */
        mcdc_lsn l;
        if ((size_t)(end - at) != MCDC_LSN_TEXT_LEN ||
            mcdc_lsn_parse(&l, at, MCDC_LSN_TEXT_LEN, NULL) != MCDC_OK)
            return false;
        if (arg) *arg = at;
        if (arg_len) *arg_len = MCDC_LSN_TEXT_LEN;
        at = end;
    }
    if (at != end) return false;
    if (generation) *generation = g;
    return true;
}
