/*
 * mcdc_changes_follow.c - the change feed following every capture instance
 * of its table (mcdc_changes.h "following"; reference §2.5): the listing
 * of the instances, the union of their columns, a batch's pieces and
 * events, the checks before a newer instance is read. The rules
 * themselves are mcdc_follow.c's; this file asks the server.
 *
 * Everything here runs on the control connection (CONTROL_CALL), between
 * batches: range reads (mcdc_changes_read, any thread) only read an
 * instance's name and columns, which a listing replaces only when the
 * stream plans its next batch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_changes_int.h"
#include "mcdc_follow.h"

static void inst_clear(mcdc_follow_inst *x) {
    mcdc_free(x->name);
    mcdc_captured_columns_free(x->cols, x->n_cols);
    mcdc_free(x->present);
    memset(x, 0, sizeof *x);
}

void mcdc_changes__follow_free(mcdc_changes *c) {
    for (int i = 0; i < c->n_inst; i++) inst_clear(&c->inst[i]);
    mcdc_free(c->inst);
    c->inst = NULL;
    c->n_inst = 0;
    for (int i = 0; i < c->n_seen; i++) mcdc_free(c->seen[i]);
    mcdc_free(c->seen);
    c->seen = NULL;
    c->n_seen = 0;
    mcdc_schema_unref(c->expected);
    c->expected = NULL;
    mcdc_free(c->ci_present);
    c->ci_present = NULL;
}

static int find_inst(const mcdc_changes *c, const char *name) {
    for (int i = 0; i < c->n_inst; i++)
        if (mcdc_str_ieq(c->inst[i].name, name)) return i;
    return -1;
}

static int seen_add(mcdc_changes *c, const char *name, mcdc_error *err) {
    for (int i = 0; i < c->n_seen; i++)
        if (mcdc_str_ieq(c->seen[i], name)) return MCDC_OK;
    char **v = mcdc_realloc(c->seen, sizeof *v * (size_t)(c->n_seen + 1));
    if (v == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    c->seen = v;
    if ((v[c->n_seen] = mcdc_strdup(name)) == NULL)
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    c->n_seen++;
    return MCDC_OK;
}

/* ci's captured columns without the table's computed ones (CDC stores NULL
 * for them in every change row: the reference leaves them out too). */
static int read_columns(mcdc_changes *c, const char *ci, mcdc_captured_column **out, int *n_out,
                        mcdc_error *err) {
    mcdc_captured_column *cols = NULL;
    mcdc_table_column *tab = NULL;
    int n = 0, nt = 0;
    int rc = mcdc_cdc_captured_columns(&cols, &n, c->client, ci, err);
    if (rc == MCDC_OK)
        rc = mcdc_cdc_table_columns(&tab, &nt, c->client, c->source_schema, c->source_table, err);
    int k = 0;
    for (int i = 0; rc == MCDC_OK && i < n; i++) {
        bool computed = false;
        for (int t = 0; t < nt; t++) computed |= tab[t].computed && tab[t].column_id == cols[i].column_id;
        if (computed) {
            mcdc_free(cols[i].name);
            mcdc_free(cols[i].data_type);
            continue;
        }
        cols[k++] = cols[i];
    }
    mcdc_table_columns_free(tab, nt);
    if (rc) {
        mcdc_captured_columns_free(cols, n);
        return rc;
    }
    *out = cols;
    *n_out = k;
    return MCDC_OK;
}

static int compute_present(const mcdc_changes *c, mcdc_follow_inst *x, mcdc_error *err) {
    mcdc_free(x->present);
    int32_t nf = c->captured->n_fields;
    x->present = mcdc_calloc((size_t)(nf ? nf : 1), sizeof *x->present);
    if (x->present == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    for (int32_t i = 0; i < nf; i++)
        for (int k = 0; k < x->n_cols && !x->present[i]; k++)
            x->present[i] = mcdc_str_ieq(x->cols[k].name, c->captured->fields[i].name);
    return MCDC_OK;
}

/* Appends 'name' to a ", "-separated list in out. */
static void append_name(char *out, size_t cap, const char *name) {
    size_t l = strlen(out);
    snprintf(out + l, cap - l, "%s'%s'", l ? ", " : "", name);
}

/* Oldest first: by creation, then by start LSN, an instance capture has not
 * taken up yet (start zero) after the ones it has. */
static int inst_order(const void *pa, const void *pb) {
    const mcdc_capture_instance *a = pa, *b = pb;
    if (a->create_date_us != b->create_date_us) return a->create_date_us < b->create_date_us ? -1 : 1;
    bool za = mcdc_lsn_is_zero(&a->start_lsn), zb = mcdc_lsn_is_zero(&b->start_lsn);
    if (za != zb) return za ? 1 : -1;
    return mcdc_lsn_cmp(&a->start_lsn, &b->start_lsn);
}

/* Lists the table's instances again: known ones keep their columns and
 * checks (a start LSN may appear), new ones get theirs read. */
static int refresh(mcdc_changes *c, mcdc_error *err) {
    mcdc_capture_instance *v = NULL;
    int n = 0;
    int rc = mcdc_cdc_capture_instances(&v, &n, c->client, c->source_schema, c->source_table, err);
    if (rc == MCDC_OK && n == 0) {
        char gone[256] = "";
        for (int i = 0; i < c->n_seen; i++) append_name(gone, sizeof gone, c->seen[i]);
        rc = mcdc_error_set(err, MCDC_E_NOTFOUND,
                            "table %s.%s has no capture instance any more (CDC was disabled on "
                            "it: %s gone); nothing is left to stream from",
                            c->source_schema, c->source_table, gone);
    }
    if (rc == MCDC_OK && n > MCDC_TABLE_INSTANCES_MAX)
        rc = mcdc_error_set(err, MCDC_E_LIMIT,
                            "table %s.%s lists %d capture instances, more than the %d a stream "
                            "follows (SQL Server allows two)",
                            c->source_schema, c->source_table, n, MCDC_TABLE_INSTANCES_MAX);
    if (rc == MCDC_OK && n > 1) qsort(v, (size_t)n, sizeof *v, inst_order);
    mcdc_follow_inst *nv = rc == MCDC_OK ? mcdc_calloc((size_t)n, sizeof *nv) : NULL;
    if (rc == MCDC_OK && nv == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    bool *moved = rc == MCDC_OK ? mcdc_calloc((size_t)(c->n_inst ? c->n_inst : 1), 1) : NULL;
    if (rc == MCDC_OK && moved == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    for (int i = 0; rc == MCDC_OK && i < n; i++) {
        int old = find_inst(c, v[i].name);
        if (old >= 0 && c->inst[old].create_date_us == v[i].create_date_us && !moved[old]) {
            nv[i] = c->inst[old];
            moved[old] = true;
        } else {
            nv[i].name = mcdc_strdup(v[i].name);
            nv[i].create_date_us = v[i].create_date_us;
            if (nv[i].name == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
            if (rc == MCDC_OK) rc = read_columns(c, v[i].name, &nv[i].cols, &nv[i].n_cols, err);
            if (rc == MCDC_OK && c->captured) rc = compute_present(c, &nv[i], err);
        }
        nv[i].start_lsn = v[i].start_lsn;
    }
    for (int i = 0; rc == MCDC_OK && i < n; i++) rc = seen_add(c, v[i].name, err);
    if (rc == MCDC_OK) {
        for (int i = 0; i < c->n_inst; i++)
            if (!moved[i]) inst_clear(&c->inst[i]);
        mcdc_free(c->inst);
        c->inst = nv;
        c->n_inst = n;
        nv = NULL;
    }
    /* A failure leaves the listing as it was; entries built here go. */
    for (int i = 0; nv && i < n; i++) {
        bool taken = false;
        for (int k = 0; k < c->n_inst && !taken; k++) taken = c->inst[k].name == nv[i].name;
        if (!taken) inst_clear(&nv[i]);
    }
    mcdc_free(nv);
    mcdc_free(moved);
    mcdc_capture_instances_free(v, n);
    return rc;
}

static mcdc_follow_view view_of(const mcdc_follow_inst *x) {
    return (mcdc_follow_view){x->name, x->cols, x->n_cols};
}

/* ---- open ------------------------------------------------------------------------ */

/* The instance of c's table (resolved) that reads its changes now: the
 * newest one whose start LSN capture has processed and is at or below
 * max_lsn (a newer one not taken up yet covers nothing), the oldest when
 * none is; into c. */
static int resolve_covering(mcdc_changes *c, mcdc_error *err) {
    mcdc_capture_instance *v = NULL;
    int n = 0;
    mcdc_lsn max;
    int rc = mcdc_cdc_max_lsn(&max, NULL, c->client, err);
    if (rc == MCDC_OK)
        rc = mcdc_cdc_capture_instances(&v, &n, c->client, c->source_schema, c->source_table, err);
    if (rc == MCDC_OK && n > 1) qsort(v, (size_t)n, sizeof *v, inst_order);
    int at = n > 0 ? 0 : -1;
    for (int i = 0; rc == MCDC_OK && i < n; i++)
        if (!mcdc_lsn_is_zero(&v[i].start_lsn) && mcdc_lsn_cmp(&v[i].start_lsn, &max) <= 0) at = i;
    char name[MCDC_IDENT_BYTES_MAX + 1] = "";
    if (rc == MCDC_OK && at >= 0) snprintf(name, sizeof name, "%s", v[at].name);
    mcdc_capture_instances_free(v, n);
    if (rc == MCDC_OK && name[0] && !mcdc_str_ieq(name, c->ci))
        rc = mcdc_changes__resolve_instance(c, name, err);
    return rc;
}

/* The table a name that is gone still names: the instance itself when it
 * is listed, else the one table whose default name <schema>_<table> it is
 * (an instance of it listed); *found, and c holds one of its instances. */
static int resolve_table_of(mcdc_changes *c, const char *name, bool *found, mcdc_error *err) {
    *found = false;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_changes__resolve_instance(c, name, &e);
    if (rc == MCDC_OK) *found = true;
    if (rc != MCDC_E_NOTFOUND) return rc && err ? (*err = e, rc) : rc;
    mcdc_capture_instance *v = NULL;
    int n = 0;
    rc = mcdc_cdc_capture_instances(&v, &n, c->client, NULL, NULL, err);
    int at = -1, tables = 0;
    for (int i = 0; rc == MCDC_OK && i < n; i++) {
        char def[2 * MCDC_IDENT_BYTES_MAX + 2];
        snprintf(def, sizeof def, "%s_%s", v[i].source_schema, v[i].source_table);
        if (!mcdc_str_ieq(def, name)) continue;
        if (at < 0 || !mcdc_str_ieq(v[at].source_schema, v[i].source_schema) ||
            !mcdc_str_ieq(v[at].source_table, v[i].source_table))
            tables++;
        at = i;
    }
    char one[MCDC_IDENT_BYTES_MAX + 1] = "";
    if (rc == MCDC_OK && at >= 0 && tables == 1) snprintf(one, sizeof one, "%s", v[at].name);
    mcdc_capture_instances_free(v, n);
    if (rc == MCDC_OK && one[0]) {
        rc = mcdc_changes__resolve_instance(c, one, err);
        *found = rc == MCDC_OK;
    }
    return rc;
}

int mcdc_changes__resolve_followed(mcdc_changes *c, const char *want,
                                   const mcdc_changes_settings *st, mcdc_error *err) {
    mcdc_error first = MCDC_ERROR_INIT;
    int rc = mcdc_changes__resolve_instance(c, want, &first);
    if (rc != MCDC_E_NOTFOUND) {
        if (rc && err) *err = first;
        return rc;
    }
    /* Gone (or never there): the table the names recorded before still
     * name, the configured one's default name last. */
    rc = seen_add(c, want, err);
    bool found = false, recorded = false, named = false;
    char names[512] = "";
    append_name(names, sizeof names, want);
    for (int i = 0; rc == MCDC_OK && st && i < st->n_also_names; i++)
        named = named || (st->also_names[i] && mcdc_str_ieq(st->also_names[i], want));
    for (int i = 0; rc == MCDC_OK && !found && st && i < st->n_also_names; i++) {
        const char *name = st->also_names[i];
        if (name == NULL || !name[0]) continue;
        recorded = true;
        if (mcdc_str_ieq(name, want)) continue;
        append_name(names, sizeof names, name);
        rc = seen_add(c, name, err);
        if (rc == MCDC_OK) rc = resolve_table_of(c, name, &found, err);
    }
    if (rc == MCDC_OK && !found) rc = resolve_table_of(c, want, &found, err);
    if (rc == MCDC_OK && found) rc = resolve_covering(c, err);
    /* Only a name that was read (one the recorded ones hold, or its table's
     * default name) is followed: any other is mistyped, not gone. */
    if (rc == MCDC_OK && found && !named && !mcdc_changes_is_table_name(c, want)) found = false;
    else if (rc == MCDC_OK && !found && recorded) {
        /* The names were read from, so they existed: CDC was disabled on
         * their table (or it was dropped), not a name mistyped. */
        mcdc_capture_instance *v = NULL;
        int n = 0;
        char listed[512] = "";
        rc = mcdc_cdc_capture_instances(&v, &n, c->client, NULL, NULL, err);
        for (int i = 0; rc == MCDC_OK && i < n; i++) append_name(listed, sizeof listed, v[i].name);
        mcdc_capture_instances_free(v, n);
        if (rc == MCDC_OK)
            rc = mcdc_error_set(err, MCDC_E_SCHEMA,
                                "captureInstance '%s' is gone, and so is every capture instance "
                                "its table was read from (%s): the table has no capture "
                                "instance any more (CDC was disabled on it, or it was dropped; "
                                "this database lists %s). Nothing was read or written. If the "
                                "table is captured under a new name, give that name as "
                                "captureInstance; else enable CDC on it again (EXEC "
                                "sys.sp_cdc_enable_table) and stream it into a new target with "
                                "--bootstrap",
                                want, names, n ? listed : "none");
        return rc;
    }
    if (rc == MCDC_OK && !found) {
        if (err) *err = first;
        return MCDC_E_NOTFOUND;
    }
    if (rc == MCDC_OK)
        mcdc_log(MCDC_LOG_WARN,
                 "capture instance %s is gone; following %s, the instance of its table "
                 "%s.%s that reads its changes now",
                 want, c->ci, c->source_schema, c->source_table);
    return rc;
}

/* How each column of the union reads: as the first instance capturing it
 * reads it (its expression depends on the type, which the union keeps). */
static int union_reads(uint8_t **out, const mcdc_schema *all, mcdc_schema *const *per,
                       uint8_t *const *per_reads, int n, mcdc_error *err) {
    int32_t nf = all->n_fields;
    uint8_t *r = mcdc_calloc((size_t)(nf ? nf : 1), sizeof *r);
    if (r == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    for (int32_t f = 0; f < nf; f++) {
        r[f] = (uint8_t)MCDC_READ_VALUE;
        for (int i = 0; i < n; i++) {
            int32_t at = mcdc_schema_find(per[i], all->fields[f].name);
            if (at >= 0 && per_reads[i]) {
                r[f] = per_reads[i][at];
                break;
            }
        }
    }
    bool plain = true;
    for (int32_t f = 0; f < nf; f++) plain = plain && r[f] == (uint8_t)MCDC_READ_VALUE;
    if (plain) { /* as mcdc_reader_infer_columns: NULL when every column is a value */
        mcdc_free(r);
        r = NULL;
    }
    *out = r;
    return MCDC_OK;
}

int mcdc_changes__follow_open(mcdc_changes *c, const char *want,
                              const mcdc_changes_settings *settings, bool keep_computed,
                              mcdc_schema **all, uint8_t **all_reads, char **unreadable,
                              char **computed, mcdc_error *err) {
    *all = NULL;
    *all_reads = NULL;
    *unreadable = *computed = NULL;
    c->follow = true;
    int rc = mcdc_changes__resolve_followed(c, want, settings, err);
    if (rc == MCDC_OK) rc = seen_add(c, c->ci, err);
    if (rc == MCDC_OK) rc = refresh(c, err);
    int n = c->n_inst;
    mcdc_schema **per = rc == MCDC_OK ? mcdc_calloc((size_t)(n ? n : 1), sizeof *per) : NULL;
    const char **names = rc == MCDC_OK ? mcdc_calloc((size_t)(n ? n : 1), sizeof *names) : NULL;
    uint8_t **per_reads = rc == MCDC_OK ? mcdc_calloc((size_t)(n ? n : 1), sizeof *per_reads) : NULL;
    if (rc == MCDC_OK && (per == NULL || names == NULL || per_reads == NULL))
        rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    mcdc_buf skipped = {0};
    for (int i = 0; rc == MCDC_OK && i < n; i++) {
        char *unr = NULL, *comp = NULL;
        names[i] = c->inst[i].name;
        rc = mcdc_reader_infer_columns(&per[i], &per_reads[i], &unr, &comp, keep_computed,
                                       c->client, c->inst[i].name, err);
        /* Every instance's unreadable columns, each named once. */
        for (char *p = unr; rc == MCDC_OK && p && *p;) {
            char *end = strstr(p, "), ");
            size_t len = end ? (size_t)(end - p) + 1 : strlen(p);
            bool dup = false;
            if (skipped.len) {
                mcdc_buf_cstr(&skipped, NULL);
                char probe[MCDC_IDENT_BYTES_MAX + 80];
                snprintf(probe, sizeof probe, "%.*s", (int)len, p);
                dup = strstr((const char *)skipped.data, probe) != NULL;
            }
            if (!dup)
                rc = mcdc_buf_printf(&skipped, err, "%s%.*s", skipped.len ? ", " : "", (int)len, p);
            p = end ? end + 3 : p + len;
        }
        if (rc == MCDC_OK && comp && mcdc_str_ieq(c->inst[i].name, c->ci)) {
            *computed = comp;
            comp = NULL;
        }
        mcdc_free(unr);
        mcdc_free(comp);
    }
    if (rc == MCDC_OK) rc = mcdc_follow_union(all, (const mcdc_schema *const *)per, names, n, err);
    if (rc == MCDC_OK) rc = union_reads(all_reads, *all, per, per_reads, n, err);
    if (rc == MCDC_OK && skipped.len && (rc = mcdc_buf_cstr(&skipped, err)) == MCDC_OK) {
        *unreadable = (char *)skipped.data;
        skipped.data = NULL;
    }
    mcdc_buf_free(&skipped);
    for (int i = 0; per && i < n; i++) mcdc_schema_unref(per[i]);
    for (int i = 0; per_reads && i < n; i++) mcdc_free(per_reads[i]);
    mcdc_free(per);
    mcdc_free(per_reads);
    mcdc_free(names);
    if (rc) {
        mcdc_schema_unref(*all);
        *all = NULL;
        mcdc_free(*all_reads);
        *all_reads = NULL;
        mcdc_free(*unreadable);
        mcdc_free(*computed);
        *unreadable = *computed = NULL;
    }
    return rc;
}

int mcdc_changes__follow_ready(mcdc_changes *c, mcdc_error *err) {
    int rc = MCDC_OK;
    for (int i = 0; rc == MCDC_OK && i < c->n_inst; i++) rc = compute_present(c, &c->inst[i], err);
    /* The schema was inferred with the oldest: the newer ones are checked
     * before their first read (a listed one passes). */
    if (c->n_inst > 0) c->inst[0].checked = true;
    int at = find_inst(c, c->ci);
    int32_t nf = c->captured->n_fields;
    if (rc == MCDC_OK && at >= 0) {
        c->ci_present = mcdc_calloc((size_t)(nf ? nf : 1), sizeof *c->ci_present);
        if (c->ci_present == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        else memcpy(c->ci_present, c->inst[at].present, (size_t)nf * sizeof *c->ci_present);
        c->ropt.present = c->ci_present;
    }
    if (rc || !c->explicit_columns) {
        if (rc == MCDC_OK) c->expected = mcdc_schema_ref(c->captured);
        return rc;
    }
    /* With the columns option the listed types are the user's conversions:
     * the DDL check compares with the types captured now, the newest
     * instance's for a column two capture. */
    mcdc_field *f = mcdc_calloc((size_t)(nf ? nf : 1), sizeof *f);
    int k = 0;
    if (f == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    for (int32_t i = 0; i < nf; i++) {
        for (int x = c->n_inst - 1; x >= 0; x--) {
            const mcdc_follow_inst *in = &c->inst[x];
            const mcdc_captured_column *col = NULL;
            for (int j = 0; j < in->n_cols && !col; j++)
                if (mcdc_str_ieq(in->cols[j].name, c->captured->fields[i].name)) col = &in->cols[j];
            mcdc_type_id t;
            int32_t p, s;
            if (col == NULL || mcdc_cdc_map_type(&t, &p, &s, col, NULL) != MCDC_OK) continue;
            f[k++] = (mcdc_field){.name = c->captured->fields[i].name, .type = t, .precision = p,
                                  .scale = s, .nullable = true};
            break;
        }
    }
    rc = mcdc_schema_create(&c->expected, k, err);
    for (int i = 0; rc == MCDC_OK && i < k; i++)
        rc = mcdc_schema_set(c->expected, i, f[i].name, f[i].type, f[i].precision, f[i].scale, 0,
                             true, err);
    mcdc_free(f);
    return rc;
}

const mcdc_captured_column *mcdc_changes__follow_captured(const mcdc_changes *c,
                                                          const char *name) {
    for (int x = c->n_inst - 1; x >= 0; x--)
        for (int j = 0; j < c->inst[x].n_cols; j++)
            if (mcdc_str_ieq(c->inst[x].cols[j].name, name)) return &c->inst[x].cols[j];
    return NULL;
}

mcdc_reader_options mcdc_changes__range_options(const mcdc_changes *c, const mcdc_lsn_range *r) {
    mcdc_reader_options o = c->ropt;
    if (r->instance > 0) {
        MCDC_ASSERT(c->follow && r->instance <= c->n_inst);
        const mcdc_follow_inst *x = &c->inst[r->instance - 1];
        o.capture_instance = x->name;
        o.present = x->present;
    }
    return o;
}

/* ---- planning -------------------------------------------------------------------- */

int mcdc_changes__follow_floor(const mcdc_changes *c, const char *read_ci) {
    int at = read_ci && read_ci[0] ? find_inst(c, read_ci) : -1;
    return at > 0 ? at : 0;
}

static int cut(const mcdc_changes *c, const mcdc_lsn *start, const mcdc_lsn *end,
               const char *read_ci, mcdc_follow_piece *out, int *n, mcdc_error *err) {
    *n = 0;
    mcdc_lsn from;
    int rc = mcdc_lsn_increment(&from, start, err);
    if (rc || c->n_inst == 0) return rc;
    mcdc_lsn *starts = mcdc_calloc((size_t)c->n_inst, sizeof *starts);
    if (starts == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    for (int i = 0; i < c->n_inst; i++) starts[i] = c->inst[i].start_lsn;
    *n = mcdc_follow_cut(out, c->n_inst, starts, c->n_inst,
                         mcdc_changes__follow_floor(c, read_ci), &from, end);
    mcdc_free(starts);
    return MCDC_OK;
}

/* Would the stream's schema hold what x captures (the check of its first
 * read, without its warnings)? */
static bool holds(const mcdc_changes *c, const mcdc_follow_inst *x) {
    if (x->checked) return true;
    mcdc_follow_view v = view_of(x);
    char *warning = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_follow_check_switch(c->captured, c->explicit_columns, &v, &x->start_lsn,
                                      &warning, &e);
    mcdc_free(warning);
    return rc == MCDC_OK;
}

int mcdc_changes_follow_end(mcdc_changes *c, const mcdc_lsn *start, const char *read_ci,
                            mcdc_lsn *end, bool *cut_at, char ci[MCDC_IDENT_BYTES_MAX + 1],
                            mcdc_error *err) {
    MCDC_ASSERT(c->follow);
    *cut_at = false;
    int rc;
    CONTROL_CALL(rc, c, err, refresh(c, err));
    mcdc_follow_piece *p = rc == MCDC_OK ? mcdc_calloc((size_t)c->n_inst, sizeof *p) : NULL;
    if (rc == MCDC_OK && p == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    int n = 0;
    if (rc == MCDC_OK) rc = cut(c, start, end, read_ci, p, &n, err);
    for (int k = 1; rc == MCDC_OK && k < n; k++) {
        if (holds(c, &c->inst[p[k].instance])) continue;
        mcdc_lsn_decrement(end, &p[k].from, NULL);
        *cut_at = true;
        n = k;
        break;
    }
    snprintf(ci, MCDC_IDENT_BYTES_MAX + 1, "%s", rc == MCDC_OK && n > 0 ? c->inst[p[n - 1].instance].name : c->ci);
    mcdc_free(p);
    return rc;
}

void mcdc_changes_batch_free(mcdc_changes_batch *b) {
    for (int i = 0; i < b->n_events; i++) mcdc_free(b->events[i].detail);
    mcdc_free(b->events);
    mcdc_free(b->pieces);
    memset(b, 0, sizeof *b);
}

/* Is piece i the batch's first of its instance (each instance asked once)? */
static bool first_of_instance(const mcdc_changes_batch *b, int i) {
    for (int k = 0; k < i; k++)
        if (b->pieces[k].instance == b->pieces[i].instance) return false;
    return true;
}

/* The DDL of the instances the pieces read recorded after start, each LSN
 * once (both instances record a DDL they share), in LSN order. */
static int gather_ddl(mcdc_changes *c, const mcdc_changes_batch *b, const mcdc_lsn *start,
                      mcdc_ddl_event **out, const char ***from_ci, int *n_out, mcdc_error *err) {
    mcdc_lsn end;
    memset(end.b, 0xFF, sizeof end.b);
    *out = NULL;
    *from_ci = NULL;
    *n_out = 0;
    mcdc_ddl_event *all = NULL;
    const char **who = NULL;
    int n = 0, rc = MCDC_OK;
    for (int i = 0; i < b->n_pieces && rc == MCDC_OK; i++) {
        if (!first_of_instance(b, i)) continue;
        const char *ci = b->pieces[i].ci;
        mcdc_ddl_event *v = NULL;
        int nv = 0;
        CONTROL_CALL(rc, c, err, mcdc_cdc_ddl_history(&v, &nv, c->client, ci, start, &end, err));
        for (int k = 0; k < nv && rc == MCDC_OK; k++) {
            bool dup = false;
            for (int m = 0; m < n && !dup; m++) dup = mcdc_lsn_cmp(&all[m].ddl_lsn, &v[k].ddl_lsn) == 0;
            if (dup) continue;
            mcdc_ddl_event *na = mcdc_realloc(all, sizeof *na * (size_t)(n + 1));
            const char **nw = na ? mcdc_realloc(who, sizeof *nw * (size_t)(n + 1)) : NULL;
            if (na) all = na;
            if (nw) who = nw;
            if (na == NULL || nw == NULL) {
                rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
                break;
            }
            all[n] = v[k];
            who[n] = ci;
            v[k].command = NULL; /* moved */
            n++;
        }
        mcdc_ddl_events_free(v, nv);
    }
    /* In LSN order (a few rows: insertion sort). */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && mcdc_lsn_cmp(&all[j].ddl_lsn, &all[j - 1].ddl_lsn) < 0; j--) {
            mcdc_ddl_event t = all[j];
            all[j] = all[j - 1];
            all[j - 1] = t;
            const char *w = who[j];
            who[j] = who[j - 1];
            who[j - 1] = w;
        }
    if (rc) {
        mcdc_ddl_events_free(all, n);
        mcdc_free(who);
        return rc;
    }
    *out = all;
    *from_ci = who;
    *n_out = n;
    return MCDC_OK;
}

/* The first bytes of text, at most max, cut on a UTF-8 character. Owned. */
static char *utf8_prefix(const char *text, size_t max) {
    size_t n = strlen(text);
    if (n > max) {
        n = max;
        while (n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80) n--;
    }
    return mcdc_strndup(text, n);
}

static int add_event(mcdc_changes_batch *b, const char *kind, const mcdc_lsn *lsn, bool has_ts,
                     int64_t ts, const char *detail, mcdc_error *err) {
    char *copy = detail ? mcdc_strdup(detail) : NULL;
    mcdc_changes_event *v = copy ? mcdc_realloc(b->events, sizeof *v * (size_t)(b->n_events + 1)) : NULL;
    if (v == NULL) {
        mcdc_free(copy);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    b->events = v;
    v[b->n_events++] = (mcdc_changes_event){kind, *lsn, has_ts, ts, copy};
    return MCDC_OK;
}

/* The DDL check (D1 of the reference's ADR 0023) and the schema_change
 * events of the DDL inside the batch it lets through. DDL after the batch
 * that capture has applied already is checked too: an ALTER COLUMN changes
 * the change table's column for every row, the batch's too. */
static int check_ddl(mcdc_changes *c, mcdc_changes_batch *b, const mcdc_lsn *start,
                     const mcdc_lsn *end, mcdc_error *err) {
    mcdc_ddl_event *ddl = NULL;
    const char **who = NULL;
    int n = 0;
    int rc = gather_ddl(c, b, start, &ddl, &who, &n, err);
    if (rc || n == 0) {
        mcdc_free(who);
        return rc;
    }
    int inside = 0; /* ddl[0, inside) lie in (start, end] */
    while (inside < n && mcdc_lsn_cmp(&ddl[inside].ddl_lsn, end) <= 0) inside++;
    mcdc_follow_ddl *d = mcdc_calloc((size_t)n, sizeof *d);
    mcdc_follow_view *used = mcdc_calloc((size_t)b->n_pieces, sizeof *used);
    if (d == NULL || used == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    for (int i = 0; rc == MCDC_OK && i < n; i++) d[i] = (mcdc_follow_ddl){who[i], ddl[i].ddl_lsn, ddl[i].command};
    if (rc == MCDC_OK && inside > 0 && mcdc_opt_schema_change_fail(c->opts))
        rc = mcdc_follow_classify_ddl(d, inside, true, c->explicit_columns, c->expected, NULL, 0,
                                      err);
    /* The types as they are now (ALTER COLUMN changes them), not as listed
     * at an earlier planning. */
    int n_used = 0;
    for (int i = 0; rc == MCDC_OK && i < b->n_pieces; i++) {
        if (!first_of_instance(b, i)) continue;
        mcdc_follow_inst *x = &c->inst[b->pieces[i].instance];
        mcdc_captured_column *cols = NULL;
        int nc = 0;
        CONTROL_CALL(rc, c, err, read_columns(c, x->name, &cols, &nc, err));
        if (rc) break;
        mcdc_captured_columns_free(x->cols, x->n_cols);
        x->cols = cols;
        x->n_cols = nc;
        used[n_used++] = view_of(x);
    }
    if (rc == MCDC_OK)
        rc = mcdc_follow_classify_ddl(d, n, false, c->explicit_columns, c->expected, used, n_used,
                                      err);
    for (int i = 0; rc == MCDC_OK && i < inside; i++) {
        int64_t us = 0;
        bool found = false;
        /* A DDL's LSN is no commit's: the commit at or before it. */
        CONTROL_CALL(rc, c, err, mcdc_cdc_lsn_to_time(&us, &found, c->client, &ddl[i].ddl_lsn, true, err));
        char *text = rc == MCDC_OK ? utf8_prefix(ddl[i].command ? ddl[i].command : "", MCDC_DDL_DETAIL_BYTES_MAX) : NULL;
        if (rc == MCDC_OK) rc = add_event(b, "schema_change", &ddl[i].ddl_lsn, found, us, text, err);
        mcdc_free(text);
        if (rc == MCDC_OK) {
            char l[MCDC_LSN_TEXT_LEN + 1];
            mcdc_lsn_format(&ddl[i].ddl_lsn, l);
            mcdc_log(MCDC_LOG_INFO, "schema_change on %s at %s: %.300s", who[i], l, ddl[i].command);
        }
    }
    mcdc_free(d);
    mcdc_free(used);
    mcdc_free(who);
    mcdc_ddl_events_free(ddl, n);
    return rc;
}

int mcdc_changes_batch_plan(mcdc_changes *c, const mcdc_lsn *start, const char *read_ci,
                            const mcdc_lsn *end, mcdc_changes_batch *out, mcdc_error *err) {
    MCDC_ASSERT(c->follow);
    memset(out, 0, sizeof *out);
    int rc;
    CONTROL_CALL(rc, c, err, refresh(c, err));
    mcdc_follow_piece *p = rc == MCDC_OK ? mcdc_calloc((size_t)c->n_inst, sizeof *p) : NULL;
    if (rc == MCDC_OK && p == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    int n = 0;
    if (rc == MCDC_OK) rc = cut(c, start, end, read_ci, p, &n, err);
    if (rc == MCDC_OK && n > 0 && (out->pieces = mcdc_calloc((size_t)n, sizeof *out->pieces)) == NULL)
        rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    for (int i = 0; rc == MCDC_OK && i < n; i++)
        out->pieces[out->n_pieces++] = (mcdc_changes_piece){
            p[i].instance, c->inst[p[i].instance].name, p[i].from, p[i].to, p[i].instance == 0};
    mcdc_free(p);
    /* Schema checks first: a batch that fails them reads nothing. */
    if (rc == MCDC_OK) rc = check_ddl(c, out, start, end, err);
    /* A switch: a piece from the start of an instance the position has not
     * read (the floor's start may equal from after a cleanup of it). */
    int lowest = mcdc_changes__follow_floor(c, read_ci);
    for (int i = 0; rc == MCDC_OK && i < out->n_pieces; i++) {
        const mcdc_changes_piece *q = &out->pieces[i];
        const mcdc_follow_inst *x = &c->inst[q->instance];
        if (q->instance <= lowest || mcdc_lsn_cmp(&q->from, &x->start_lsn) != 0) continue;
        mcdc_follow_view v = view_of(x);
        char *detail = mcdc_follow_switch_detail(c->inst[q->instance - 1].name, &v, c->captured,
                                                 &x->start_lsn);
        int64_t us = 0;
        bool found = false;
        CONTROL_CALL(rc, c, err, mcdc_cdc_lsn_to_time(&us, &found, c->client, &x->start_lsn, false, err));
        if (rc == MCDC_OK) rc = add_event(out, "capture_instance_switched", &x->start_lsn, found, us, detail, err);
        free(detail); /* jansson's */
        out->switches = true;
        out->switch_lsn = x->start_lsn;
        if (rc == MCDC_OK) {
            char s[MCDC_LSN_TEXT_LEN + 1];
            mcdc_lsn_format(&x->start_lsn, s);
            mcdc_log(MCDC_LOG_INFO, "capture_instance_switched: %s -> %s at %s",
                     c->inst[q->instance - 1].name, x->name, s);
        }
    }
    if (rc) mcdc_changes_batch_free(out);
    return rc;
}

int mcdc_changes_piece_min_lsn(mcdc_changes *c, const mcdc_changes_piece *p, mcdc_lsn *out,
                               mcdc_error *err) {
    int rc;
    CONTROL_CALL(rc, c, err, mcdc_cdc_min_lsn(out, c->client, p->ci, err));
    return rc;
}

int mcdc_changes_piece_loss(mcdc_changes *c, const mcdc_changes_piece *p, mcdc_piece_loss *out,
                            mcdc_error *err) {
    memset(out, 0, sizeof *out);
    int rc = mcdc_changes_piece_min_lsn(c, p, &out->min_lsn, err);
    if (rc || mcdc_lsn_is_zero(&out->min_lsn) || mcdc_lsn_cmp(&p->from, &out->min_lsn) >= 0)
        return rc;
    out->lost = true;
    mcdc_lsn_format(&p->from, out->from);
    mcdc_lsn_format(&out->min_lsn, out->min);
    if (p->oldest) mcdc_changes_gone(c, out->gone, sizeof out->gone);
    return MCDC_OK;
}

/* A missing SELECT on the instance's change table, asked before the read
 * (HAS_PERMS_BY_NAME: independent of the server's language). */
static int check_grant(mcdc_changes *c, const char *ci, mcdc_error *err) {
    int has = -1;
    int rc = mcdc_cdc_has_select(&has, c->client, ci, err);
    if (rc || has != 0) return rc;
    char *user = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_cdc_user_name(&user, c->client, &e);
    rc = mcdc_error_set(err, MCDC_E_PERMISSION,
                        "the stream reaches capture instance '%s' of its table, and this login "
                        "may not read its change table cdc.[%s_CT]; a DBA must run: GRANT "
                        "SELECT ON cdc.[%s_CT] TO [%s]; (then restart the stream: it goes on "
                        "where it stopped)",
                        ci, ci, ci, user ? user : "<user>");
    mcdc_free(user);
    return rc;
}

int mcdc_changes_piece_check(mcdc_changes *c, const mcdc_changes_piece *p, mcdc_error *err) {
    MCDC_ASSERT(c->follow && p->instance >= 0 && p->instance < c->n_inst);
    mcdc_follow_inst *x = &c->inst[p->instance];
    if (x->checked) return MCDC_OK;
    mcdc_follow_view v = view_of(x);
    char *warning = NULL;
    int rc = mcdc_follow_check_switch(c->captured, c->explicit_columns, &v, &x->start_lsn,
                                      &warning, err);
    if (warning) mcdc_log(MCDC_LOG_WARN, "%s", warning);
    mcdc_free(warning);
    if (rc == MCDC_OK) CONTROL_CALL(rc, c, err, check_grant(c, x->name, err));
    if (rc == MCDC_OK) x->checked = true;
    return rc;
}

void mcdc_changes_gone(const mcdc_changes *c, char *out, size_t cap) {
    out[0] = 0;
    for (int i = 0; i < c->n_seen; i++)
        if (find_inst(c, c->seen[i]) < 0) append_name(out, cap, c->seen[i]);
}

bool mcdc_changes_is_table_name(const mcdc_changes *c, const char *name) {
    if (name == NULL) return false;
    if (find_inst(c, name) >= 0 || mcdc_str_ieq(name, c->ci)) return true;
    char def[2 * MCDC_IDENT_BYTES_MAX + 2];
    snprintf(def, sizeof def, "%s_%s", c->source_schema ? c->source_schema : "",
             c->source_table ? c->source_table : "");
    return mcdc_str_ieq(def, name);
}
