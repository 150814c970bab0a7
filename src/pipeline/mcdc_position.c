/* mcdc_position.c - a job's position (see mcdc_position.h). */
#include "mcdc_position.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_offset.h"

static int nomem(mcdc_error *err) { return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory"); }

static int corrupt(mcdc_error *err, const char *what) {
    return mcdc_error_set(err, MCDC_E_CORRUPT, "a position %s", what);
}

/* ---- owning, copying, comparing --------------------------------------------------- */

void mcdc_pos_free(mcdc_pos *p) {
    if (p == NULL) return;
    if (p->kind == MCDC_POS_WAVE) {
        for (int32_t i = 0; i < p->wave.n; i++) {
            mcdc_free(p->wave.chunks[i].lo);
            mcdc_free(p->wave.chunks[i].hi);
        }
        mcdc_free(p->wave.chunks);
    }
    memset(p, 0, sizeof *p);
}

int mcdc_pos_wave_alloc(mcdc_pos *p, int64_t chunk, int32_t n, mcdc_error *err) {
    MCDC_ASSERT(n >= 0);
    mcdc_pos_free(p);
    p->kind = MCDC_POS_WAVE;
    p->wave.chunk = chunk;
    p->wave.has_chunks = true;
    p->wave.chunks = mcdc_calloc((size_t)(n ? n : 1), sizeof *p->wave.chunks);
    if (p->wave.chunks == NULL) {
        memset(p, 0, sizeof *p);
        return nomem(err);
    }
    p->wave.n = n;
    return MCDC_OK;
}

static int dup_text(char **dst, const char *src, mcdc_error *err) {
    *dst = NULL;
    if (src && (*dst = mcdc_strdup(src)) == NULL) return nomem(err);
    return MCDC_OK;
}

int mcdc_pos_copy(mcdc_pos *dst, const mcdc_pos *src, mcdc_error *err) {
    mcdc_pos_free(dst);
    if (src == NULL) return MCDC_OK;
    if (src->kind != MCDC_POS_WAVE || !src->wave.has_chunks) {
        *dst = *src;
        if (dst->kind == MCDC_POS_WAVE) dst->wave.chunks = NULL, dst->wave.n = 0;
        return MCDC_OK;
    }
    int rc = mcdc_pos_wave_alloc(dst, src->wave.chunk, src->wave.n, err);
    for (int32_t i = 0; rc == MCDC_OK && i < src->wave.n; i++) {
        dst->wave.chunks[i].chunk = src->wave.chunks[i].chunk;
        rc = dup_text(&dst->wave.chunks[i].lo, src->wave.chunks[i].lo, err);
        if (rc == MCDC_OK) rc = dup_text(&dst->wave.chunks[i].hi, src->wave.chunks[i].hi, err);
    }
    if (rc) mcdc_pos_free(dst);
    return rc;
}

static bool lsn_opt_eq(const mcdc_lsn_opt *a, const mcdc_lsn_opt *b) {
    return a->set == b->set && (!a->set || mcdc_lsn_cmp(&a->v, &b->v) == 0);
}

static bool text_eq(const char *a, const char *b) {
    return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

bool mcdc_apply_cells_eq(const mcdc_apply_cells *a, const mcdc_apply_cells *b) {
    return lsn_opt_eq(&a->applied, &b->applied) && lsn_opt_eq(&a->snapshot, &b->snapshot) &&
           lsn_opt_eq(&a->open, &b->open) && a->has_wave == b->has_wave &&
           (!a->has_wave || a->wave == b->wave);
}

bool mcdc_pos_eq(const mcdc_pos *a, const mcdc_pos *b) {
    if (a == NULL || b == NULL) return a == b;
    if (a->kind != b->kind) return false;
    switch (a->kind) {
    case MCDC_POS_NONE: return true;
    case MCDC_POS_OFFSET: {
        const mcdc_pos_offset *x = &a->offset, *y = &b->offset;
        return mcdc_lsn_cmp(&x->lsn, &y->lsn) == 0 && x->has_ts == y->has_ts &&
               (!x->has_ts || x->commit_us == y->commit_us) && strcmp(x->ci, y->ci) == 0;
    }
    case MCDC_POS_WAVE: {
        const mcdc_pos_wave *x = &a->wave, *y = &b->wave;
        if (x->chunk != y->chunk || x->has_chunks != y->has_chunks || x->n != y->n) return false;
        for (int32_t i = 0; i < x->n; i++)
            if (x->chunks[i].chunk != y->chunks[i].chunk ||
                !text_eq(x->chunks[i].lo, y->chunks[i].lo) ||
                !text_eq(x->chunks[i].hi, y->chunks[i].hi))
                return false;
        return true;
    }
    case MCDC_POS_APPLY: {
        const mcdc_pos_apply *x = &a->apply, *y = &b->apply;
        return mcdc_apply_cells_eq(&x->cells, &y->cells) && x->has_versions == y->has_versions &&
               (!x->has_versions || (x->bronze_version == y->bronze_version &&
                                     x->facts_version == y->facts_version)) &&
               x->has_verdict == y->has_verdict &&
               (!x->has_verdict ||
                (x->verdict_us == y->verdict_us && strcmp(x->verdict_lsn, y->verdict_lsn) == 0));
    }
    case MCDC_POS_STAMP: {
        const mcdc_pos_stamp *x = &a->stamp, *y = &b->stamp;
        return x->has_lsn == y->has_lsn && (!x->has_lsn || mcdc_lsn_cmp(&x->lsn, &y->lsn) == 0) &&
               x->has_ts == y->has_ts && (!x->has_ts || x->commit_us == y->commit_us);
    }
    }
    return false;
}

/* ---- bounds ----------------------------------------------------------------------- */

int mcdc_pos_bound_text(char **out, const json_t *bound, mcdc_error *err) {
    *out = NULL;
    if (bound == NULL || json_is_null(bound)) return MCDC_OK;
    char *t = json_dumps(bound, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    int rc = t ? dup_text(out, t, err) : nomem(err);
    free(t);
    return rc;
}

json_t *mcdc_pos_bound_json(const char *text) {
    if (text == NULL) return json_null();
    json_error_t je;
    return json_loads(text, JSON_DECODE_ANY, &je);
}

/* ---- JSON ----------------------------------------------------------------------------- */

static void offset_of(mcdc_offset *o, const mcdc_lsn *lsn, bool has_ts, int64_t us) {
    memset(o, 0, sizeof *o);
    mcdc_lsn_format(lsn, o->lsn);
    o->has_commit_ts = has_ts;
    o->commit_us = us;
}

static json_t *lsn_opt_json(const mcdc_lsn_opt *o) {
    char t[MCDC_LSN_TEXT_LEN + 1];
    if (!o->set) return json_null();
    mcdc_lsn_format(&o->v, t);
    return json_string(t);
}

static json_t *wave_json(const mcdc_pos_wave *w) {
    json_t *j = json_pack("{s:I}", "chunk", (json_int_t)w->chunk);
    if (j == NULL || !w->has_chunks) return j;
    json_t *list = json_array();
    for (int32_t i = 0; list && i < w->n; i++) {
        const mcdc_pos_chunk *c = &w->chunks[i];
        json_t *lo = mcdc_pos_bound_json(c->lo), *hi = mcdc_pos_bound_json(c->hi);
        json_t *one = lo && hi ? json_pack("[I, o, o]", (json_int_t)c->chunk, lo, hi) : NULL;
        if (one == NULL) {
            if (!(lo && hi)) json_decref(lo), json_decref(hi);
            json_decref(list);
            list = NULL;
        } else if (json_array_append_new(list, one)) {
            json_decref(list);
            list = NULL;
        }
    }
    if (list == NULL || json_object_set_new(j, "chunks", list)) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static json_t *apply_json(const mcdc_pos_apply *a) {
    const mcdc_apply_cells *c = &a->cells;
    json_t *j = json_pack("{s:o, s:o, s:o, s:o}", "applied_lsn", lsn_opt_json(&c->applied),
                          "snapshot_lsn", lsn_opt_json(&c->snapshot), "open_snapshot_lsn",
                          lsn_opt_json(&c->open), "snapshot_wave",
                          c->has_wave ? json_integer(c->wave) : json_null());
    int bad = j == NULL;
    if (!bad && a->has_versions) {
        bad |= json_object_set_new(j, "bronze_version", json_integer(a->bronze_version));
        bad |= json_object_set_new(j, "facts_version", json_integer(a->facts_version));
    }
    if (!bad && a->has_verdict) {
        bad |= json_object_set_new(j, "verdict_lsn", json_string(a->verdict_lsn));
        bad |= json_object_set_new(j, "verdict_us", json_integer(a->verdict_us));
    }
    if (bad) {
        json_decref(j);
        return NULL;
    }
    return j;
}

json_t *mcdc_pos_json(const mcdc_pos *p) {
    mcdc_offset o;
    switch (p->kind) {
    case MCDC_POS_NONE: return json_object();
    case MCDC_POS_OFFSET: {
        offset_of(&o, &p->offset.lsn, p->offset.has_ts, p->offset.commit_us);
        json_t *j = mcdc_offset_json(&o);
        if (j && p->offset.ci[0] &&
            json_object_set_new(j, "capture_instance", json_string(p->offset.ci))) {
            json_decref(j);
            return NULL;
        }
        return j;
    }
    case MCDC_POS_WAVE: return wave_json(&p->wave);
    case MCDC_POS_APPLY: return apply_json(&p->apply);
    case MCDC_POS_STAMP:
        if (!p->stamp.has_lsn) return json_object();
        offset_of(&o, &p->stamp.lsn, p->stamp.has_ts, p->stamp.commit_us);
        return mcdc_offset_json(&o);
    }
    return NULL;
}

/* An offset's "lsn" and "commit_ts" (mcdc_offset.h). */
static int parse_lsn_ts(const json_t *j, mcdc_lsn *lsn, bool *has_ts, int64_t *us,
                        mcdc_error *err) {
    mcdc_offset o;
    int rc = mcdc_offset_parse(&o, j, err);
    if (rc == MCDC_OK) rc = mcdc_lsn_parse_cstr(lsn, o.lsn, err);
    *has_ts = o.has_commit_ts;
    *us = o.commit_us;
    return rc ? MCDC_E_CORRUPT : MCDC_OK;
}

static int parse_wave(mcdc_pos *out, const json_t *j, mcdc_error *err) {
    json_t *c = json_object_get(j, "chunk"), *list = json_object_get(j, "chunks");
    if (!json_is_integer(c)) return corrupt(err, "lacks its \"chunk\"");
    if (list == NULL || json_is_null(list)) {
        out->kind = MCDC_POS_WAVE;
        out->wave.chunk = (int64_t)json_integer_value(c);
        return MCDC_OK;
    }
    if (!json_is_array(list) || json_array_size(list) > INT32_MAX)
        return corrupt(err, "has \"chunks\" that are not a list");
    int rc = mcdc_pos_wave_alloc(out, (int64_t)json_integer_value(c), (int32_t)json_array_size(list),
                                 err);
    for (int32_t i = 0; rc == MCDC_OK && i < out->wave.n; i++) {
        json_t *one = json_array_get(list, (size_t)i);
        json_t *id = json_array_get(one, 0);
        if (!json_is_array(one) || json_array_size(one) != 3 || !json_is_integer(id)) {
            rc = corrupt(err, "has a chunk that is not [chunk, lo, hi]");
            break;
        }
        out->wave.chunks[i].chunk = (int64_t)json_integer_value(id);
        rc = mcdc_pos_bound_text(&out->wave.chunks[i].lo, json_array_get(one, 1), err);
        if (rc == MCDC_OK) rc = mcdc_pos_bound_text(&out->wave.chunks[i].hi, json_array_get(one, 2), err);
    }
    if (rc) mcdc_pos_free(out);
    return rc;
}

/* An LSN cell as the control table and bronze hold it: "0x" and 20 hex
 * digits; anything else is none. */
static mcdc_lsn_opt lsn_opt_of(const json_t *j) {
    mcdc_lsn_opt o = {0};
    const char *t = json_string_value(j);
    o.set = t && strlen(t) == MCDC_LSN_TEXT_LEN &&
            mcdc_lsn_parse(&o.v, t, MCDC_LSN_TEXT_LEN, NULL) == MCDC_OK;
    if (!o.set) memset(&o, 0, sizeof o);
    return o;
}

static int parse_apply(mcdc_pos *out, const json_t *j, mcdc_error *err) {
    if (!json_is_object(j)) return corrupt(err, "of apply is not a JSON object");
    out->kind = MCDC_POS_APPLY;
    mcdc_pos_apply *a = &out->apply;
    a->cells.applied = lsn_opt_of(json_object_get(j, "applied_lsn"));
    a->cells.snapshot = lsn_opt_of(json_object_get(j, "snapshot_lsn"));
    a->cells.open = lsn_opt_of(json_object_get(j, "open_snapshot_lsn"));
    json_t *w = json_object_get(j, "snapshot_wave");
    a->cells.has_wave = json_is_integer(w);
    a->cells.wave = a->cells.has_wave ? (int64_t)json_integer_value(w) : 0;
    json_t *bv = json_object_get(j, "bronze_version"), *fv = json_object_get(j, "facts_version");
    a->has_versions = json_is_integer(bv) && json_is_integer(fv);
    a->bronze_version = a->has_versions ? (int64_t)json_integer_value(bv) : 0;
    a->facts_version = a->has_versions ? (int64_t)json_integer_value(fv) : 0;
    const char *vl = json_string_value(json_object_get(j, "verdict_lsn"));
    json_t *vu = json_object_get(j, "verdict_us");
    a->has_verdict = vl && strlen(vl) < sizeof a->verdict_lsn && json_is_integer(vu);
    if (a->has_verdict) {
        snprintf(a->verdict_lsn, sizeof a->verdict_lsn, "%s", vl);
        a->verdict_us = (int64_t)json_integer_value(vu);
    }
    return MCDC_OK;
}

int mcdc_pos_parse(mcdc_pos *out, mcdc_pos_kind k, const json_t *j, mcdc_error *err) {
    memset(out, 0, sizeof *out);
    if (!json_is_object(j)) return corrupt(err, "is not a JSON object");
    int rc = MCDC_OK;
    switch (k) {
    case MCDC_POS_NONE: return MCDC_OK;
    case MCDC_POS_OFFSET: {
        mcdc_pos_offset *o = &out->offset;
        rc = parse_lsn_ts(j, &o->lsn, &o->has_ts, &o->commit_us, err);
        json_t *ci = json_object_get(j, "capture_instance");
        if (rc == MCDC_OK && ci && !(json_is_string(ci) && json_string_length(ci) < sizeof o->ci))
            rc = corrupt(err, "has a \"capture_instance\" that is no capture instance's name");
        if (rc == MCDC_OK && ci) memcpy(o->ci, json_string_value(ci), json_string_length(ci) + 1);
        break;
    }
    case MCDC_POS_WAVE: return parse_wave(out, j, err);
    case MCDC_POS_APPLY: return parse_apply(out, j, err);
    case MCDC_POS_STAMP: {
        json_t *l = json_object_get(j, "lsn");
        mcdc_pos_stamp *s = &out->stamp;
        s->has_lsn = l && !json_is_null(l);
        if (s->has_lsn) rc = parse_lsn_ts(j, &s->lsn, &s->has_ts, &s->commit_us, err);
        break;
    }
    }
    if (rc) {
        memset(out, 0, sizeof *out);
        return rc;
    }
    out->kind = k;
    return MCDC_OK;
}

const char *mcdc_pos_text(const mcdc_pos *p, char *buf, size_t cap) {
    json_t *j = p && p->kind != MCDC_POS_NONE ? mcdc_pos_json(p) : NULL;
    char *t = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    snprintf(buf, cap, "%s", t ? t : "(none)");
    free(t);
    return buf;
}
