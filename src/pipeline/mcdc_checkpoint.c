/* mcdc_checkpoint.c - a job's checkpoint directory (see mcdc_checkpoint.h). */
#include "mcdc_checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Checkpoint files are a few hundred bytes; anything larger is damage. */
#define CKPT_FILE_BYTES_MAX (1024 * 1024)
/* The metadata format written here; files without "format" are the first
 * builds' (app_id, capture_instance, target as given, created). */
#define CKPT_FORMAT 1

struct mcdc_checkpoint {
    mcdc_storage *st;
    char *dir;
    char *name;          /* "checkpoint <dir>", for messages */
    char id[64];
    mcdc_ckpt_binding b; /* borrowed from the caller of open */
    bool fresh;
    mcdc_pos_kind kind;  /* of its positions */
    mcdc_pos start;      /* metadata's "start" (NONE: none) */
};

static int put_json(mcdc_checkpoint *c, const char *key, json_t *j, mcdc_error *err) {
    if (j == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory building %s", key);
    char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    if (text == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory writing %s", key);
    int rc = mcdc_storage_put_if_absent(c->st, key, text, strlen(text), err);
    free(text);
    return rc;
}

/* The JSON object at key; NULL with MCDC_E_NOTFOUND in err when missing. */
static json_t *get_json(mcdc_checkpoint *c, const char *key, mcdc_error *err) {
    mcdc_buf b = {0};
    json_t *j = NULL;
    if (mcdc_storage_get(c->st, key, CKPT_FILE_BYTES_MAX, &b, err) == MCDC_OK) {
        json_error_t je;
        j = json_loadb((const char *)b.data, b.len, 0, &je);
        if (j == NULL || !json_is_object(j)) {
            json_decref(j);
            j = NULL;
            mcdc_error_set(err, MCDC_E_CORRUPT,
                           "%s/%s is not a JSON object (line %d: %s); the checkpoint is "
                           "damaged: restore it from a backup, or start over with a new "
                           "checkpoint, a new app id and a new (or rebuilt) target",
                           c->dir, key, je.line, je.text);
        }
    }
    mcdc_buf_free(&b);
    return j;
}

static const char *jstr(const json_t *j, const char *key) {
    return json_string_value(json_object_get(j, key));
}

/* Compares one bound field; NULL on either side of an optional field means
 * "none" and must match too. */
static int check_field(const mcdc_checkpoint *c, const char *field, const char *have,
                       const char *want, bool ignore_case, const char *remedy, mcdc_error *err) {
    bool same = (have == NULL && want == NULL) ||
                (have && want && (ignore_case ? mcdc_str_ieq(have, want) : strcmp(have, want) == 0));
    if (same) return MCDC_OK;
    return mcdc_error_set(err, MCDC_E_MISMATCH,
                          "checkpoint %s is bound to %s %s%s%s, not %s%s%s: a checkpoint serves "
                          "one app id, target, capture instance and facts table for its whole "
                          "life, and nothing was written. %s",
                          c->dir, field, have ? "'" : "", have ? have : "(none)", have ? "'" : "",
                          want ? "'" : "", want ? want : "(none)", want ? "'" : "", remedy);
}

static const char REMEDY[] = "Run it with the arguments it was created with; for another "
                             "target or capture instance use a new checkpoint with a new app "
                             "id (and a new or rebuilt target)";

/* A first build's target was stored as given: compare canonical forms. */
static int check_legacy_target(const mcdc_checkpoint *c, const char *stored, mcdc_error *err) {
    char *canon = NULL;
    int rc = stored ? mcdc_path_canonical(&canon, stored, err) : MCDC_OK;
    if (rc) return rc;
    rc = check_field(c, "target", canon ? canon : stored, c->b.target, false, REMEDY, err);
    mcdc_free(canon);
    return rc;
}

static int check_binding(mcdc_checkpoint *c, const json_t *m, mcdc_error *err) {
    json_int_t format = json_integer_value(json_object_get(m, "format"));
    const char *job = jstr(m, "job");
    int rc = check_field(c, "app id", jstr(m, "app_id"), c->b.app_id, false,
                         "A new app id needs a new checkpoint and a new (or rebuilt) target", err);
    if (rc == MCDC_OK && format >= 1)
        rc = check_field(c, "job", job, c->b.job, false,
                         "Each job (stream, backfill...) needs a checkpoint of its own", err);
    if (rc == MCDC_OK)
        rc = format >= 1 ? check_field(c, "target", jstr(m, "target"), c->b.target, false, REMEDY, err)
                         : check_legacy_target(c, jstr(m, "target"), err);
    /* A stream that followed its table to a newer capture instance may be
     * named by either. */
    const char *bound_ci = jstr(m, "capture_instance");
    bool alias = bound_ci && c->b.capture_instance_alias &&
                 mcdc_str_ieq(bound_ci, c->b.capture_instance_alias);
    if (rc == MCDC_OK && !alias)
        rc = check_field(c, "capture instance", bound_ci, c->b.capture_instance, true, REMEDY, err);
    if (rc == MCDC_OK && format >= 1)
        rc = check_field(c, "facts table", jstr(m, "facts_table"), c->b.facts_table, false,
                         "Give it the facts table it was created with: its rows of this app id "
                         "are part of the checkpoint's state",
                         err);
    if (rc) return rc;
    if (format > CKPT_FORMAT)
        return mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                              "checkpoint %s has metadata format %lld, newer than this "
                              "mssql-cdc knows (%d): upgrade mssql-cdc",
                              c->dir, (long long)format, CKPT_FORMAT);
    json_t *start = json_object_get(m, "start");
    mcdc_pos_free(&c->start);
    if (start && mcdc_pos_parse(&c->start, c->kind, start, NULL) != MCDC_OK)
        return mcdc_error_set(err, MCDC_E_CORRUPT,
                              "checkpoint %s: metadata's \"start\" is not a position; the "
                              "checkpoint is damaged: restore it from a backup",
                              c->dir);
    const char *id = jstr(m, "id");
    /* The first builds had no id: their creation time names the checkpoint. */
    snprintf(c->id, sizeof c->id, "%s%s", id ? "" : "v0:", id ? id : jstr(m, "created") ? jstr(m, "created") : "?");
    return MCDC_OK;
}

int mcdc_checkpoint_open(mcdc_checkpoint **out, const mcdc_storage_env *env, const char *dir,
                         const mcdc_ckpt_binding *b, mcdc_pos_kind kind, bool *fresh,
                         mcdc_error *err) {
    MCDC_ASSERT(dir && b && b->job && b->app_id && b->target && kind != MCDC_POS_NONE);
    *out = NULL;
    mcdc_checkpoint *c = mcdc_calloc(1, sizeof *c);
    if (c == NULL || (c->dir = mcdc_strdup(dir)) == NULL) {
        mcdc_free(c);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    c->b = *b;
    c->kind = kind;
    size_t cap = strlen(dir) + sizeof "checkpoint ";
    if ((c->name = mcdc_malloc(cap)) == NULL) {
        mcdc_checkpoint_free(c);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    snprintf(c->name, cap, "checkpoint %s", dir);
    int rc = mcdc_storage_open_env(&c->st, env, dir, err);
    json_t *m = NULL;
    if (rc == MCDC_OK) {
        mcdc_error e = MCDC_ERROR_INIT;
        m = get_json(c, "metadata", &e);
        if (m) rc = check_binding(c, m, err);
        else if (e.code == MCDC_E_NOTFOUND) c->fresh = true;
        else rc = err ? (*err = e, e.code) : e.code;
    }
    json_decref(m);
    if (rc) {
        mcdc_checkpoint_free(c);
        return rc;
    }
    *fresh = c->fresh;
    *out = c;
    return MCDC_OK;
}

void mcdc_checkpoint_free(mcdc_checkpoint *c) {
    if (c == NULL) return;
    mcdc_pos_free(&c->start);
    mcdc_storage_free(c->st);
    mcdc_free(c->dir);
    mcdc_free(c->name);
    mcdc_free(c);
}

const char *mcdc_checkpoint_dir(const mcdc_checkpoint *c) { return c->dir; }
const char *mcdc_checkpoint_id(const mcdc_checkpoint *c) { return c->id; }

const mcdc_pos *mcdc_checkpoint_start(const mcdc_checkpoint *c) {
    return c->start.kind != MCDC_POS_NONE ? &c->start : NULL;
}

int mcdc_checkpoint_bind(mcdc_checkpoint *c, const mcdc_pos *start, mcdc_error *err) {
    if (!c->fresh) return MCDC_OK;
    char now[32], id[37];
    mcdc_format_ts_us(mcdc_now_utc_us(), 3, now);
    mcdc_uuid4(id);
    json_t *m = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s}", "format", CKPT_FORMAT, "id", id, "job",
                          c->b.job, "app_id", c->b.app_id, "target", c->b.target, "created", now);
    if (m && c->b.capture_instance)
        json_object_set_new(m, "capture_instance", json_string(c->b.capture_instance));
    if (m && c->b.facts_table) json_object_set_new(m, "facts_table", json_string(c->b.facts_table));
    json_t *sj = start ? mcdc_pos_json(start) : NULL;
    if (m && start && (sj == NULL || json_object_set_new(m, "start", sj))) {
        json_decref(m);
        m = NULL;
    }
    int rc = put_json(c, "metadata", m, err);
    if (rc == MCDC_E_CONFLICT) {
        /* Another run bound it first: hold ourselves to what it wrote. */
        json_t *theirs = get_json(c, "metadata", err);
        rc = theirs ? check_binding(c, theirs, err) : MCDC_E_CORRUPT;
        json_decref(theirs);
    } else if (rc == MCDC_OK) {
        snprintf(c->id, sizeof c->id, "%s", id);
        rc = mcdc_pos_copy(&c->start, start, err);
    }
    if (rc == MCDC_OK) c->fresh = false;
    return rc;
}

static int last_in(mcdc_checkpoint *c, const char *dir, int64_t *out, mcdc_error *err);

int mcdc_checkpoint_peek_instances(const mcdc_storage_env *env, const char *dir, char **bound,
                                   char **last_read, mcdc_error *err) {
    *bound = *last_read = NULL;
    mcdc_checkpoint c = {.dir = (char *)dir, .kind = MCDC_POS_OFFSET};
    int rc = mcdc_storage_open_env(&c.st, env, dir, err);
    mcdc_error e = MCDC_ERROR_INIT;
    json_t *m = rc == MCDC_OK ? get_json(&c, "metadata", &e) : NULL;
    if (rc == MCDC_OK && m == NULL && e.code != MCDC_E_NOTFOUND) rc = err ? (*err = e, e.code) : e.code;
    const char *b = jstr(m, "capture_instance");
    if (rc == MCDC_OK && b && (*bound = mcdc_strdup(b)) == NULL)
        rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    json_decref(m);
    int64_t n = -1;
    if (rc == MCDC_OK) rc = last_in(&c, "offsets/", &n, err);
    mcdc_pos start = {0}, end = {0};
    if (rc == MCDC_OK && n >= 0) rc = mcdc_checkpoint_read_plan(&c, n, &start, &end, err);
    const char *l = end.kind == MCDC_POS_OFFSET && end.offset.ci[0] ? end.offset.ci : NULL;
    if (rc == MCDC_OK && l && (*last_read = mcdc_strdup(l)) == NULL)
        rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    mcdc_pos_free(&start);
    mcdc_pos_free(&end);
    mcdc_storage_free(c.st);
    if (rc) {
        mcdc_free(*bound);
        mcdc_free(*last_read);
        *bound = *last_read = NULL;
    }
    return rc;
}

/* Highest numbered file under dir ("offsets/"), or -1. */
static int last_in(mcdc_checkpoint *c, const char *dir, int64_t *out, mcdc_error *err) {
    mcdc_storage_listing l = {0};
    *out = -1;
    int rc = mcdc_storage_list(c->st, dir, &l, err);
    for (size_t i = 0; rc == MCDC_OK && i < l.count; i++) {
        int64_t v;
        if (mcdc_parse_i64(l.entries[i].name, &v) == MCDC_OK && v > *out) *out = v;
    }
    mcdc_storage_listing_free(&l);
    return rc;
}

int mcdc_checkpoint_last(mcdc_checkpoint *c, int64_t *planned, int64_t *committed,
                         mcdc_error *err) {
    int rc = last_in(c, "offsets/", planned, err);
    if (rc == MCDC_OK) rc = last_in(c, "commits/", committed, err);
    if (rc == MCDC_OK && (*committed > *planned || *planned > *committed + 1))
        rc = mcdc_error_set(err, MCDC_E_CORRUPT,
                            "checkpoint %s is inconsistent: the last unit planned is %lld but "
                            "the last committed is %lld (a unit is planned only after the one "
                            "before it committed). Restore the checkpoint from a backup, or "
                            "start over with a new checkpoint, a new app id and a new (or "
                            "rebuilt) target",
                            c->dir, (long long)*planned, (long long)*committed);
    return rc;
}

int mcdc_checkpoint_read_plan(mcdc_checkpoint *c, int64_t n, mcdc_pos *start, mcdc_pos *end,
                              mcdc_error *err) {
    mcdc_pos_free(start);
    mcdc_pos_free(end);
    char key[64];
    snprintf(key, sizeof key, "offsets/%lld", (long long)n);
    json_t *j = get_json(c, key, err);
    if (j == NULL) return err ? err->code : MCDC_E_CORRUPT;
    mcdc_error why = MCDC_ERROR_INIT;
    int rc = json_integer_value(json_object_get(j, "batch_id")) == n ? MCDC_OK : MCDC_E_CORRUPT;
    if (rc == MCDC_OK) rc = mcdc_pos_parse(start, c->kind, json_object_get(j, "start"), &why);
    if (rc == MCDC_OK) rc = mcdc_pos_parse(end, c->kind, json_object_get(j, "end"), &why);
    if (rc) {
        mcdc_pos_free(start);
        mcdc_pos_free(end);
        rc = mcdc_error_set(err, MCDC_E_CORRUPT,
                            "%s/%s lacks a valid \"start\", \"end\" or the matching "
                            "\"batch_id\"%s%s; the checkpoint is damaged: restore it from a backup",
                            c->dir, key, why.message[0] ? ": " : "", why.message);
    }
    json_decref(j);
    return rc;
}

int mcdc_checkpoint_write_plan(mcdc_checkpoint *c, int64_t n, const mcdc_pos *start,
                               const mcdc_pos *end, mcdc_error *err) {
    MCDC_ASSERT(start->kind == c->kind && end->kind == c->kind);
    char key[64];
    snprintf(key, sizeof key, "offsets/%lld", (long long)n);
    json_t *s = mcdc_pos_json(start), *e = mcdc_pos_json(end);
    json_t *j = s && e ? json_pack("{s:I, s:o, s:o}", "batch_id", (json_int_t)n, "start", s, "end", e)
                       : NULL;
    if (!(s && e)) {
        json_decref(s);
        json_decref(e);
    }
    /* MCDC_E_CONFLICT: another process planned unit n first (the frame
     * says so). */
    return put_json(c, key, j, err);
}

int mcdc_checkpoint_read_commit(mcdc_checkpoint *c, int64_t n, mcdc_ckpt_commit *out,
                                mcdc_error *err) {
    out->rows = 0;
    out->data_txn = -1;
    /* Older markers: walk back to the newest unit with rows. Bounded by the
     * checkpoint's length, and only once: new markers carry data_txn. */
    for (int64_t k = n; k >= 0; k--) {
        char key[64];
        snprintf(key, sizeof key, "commits/%lld", (long long)k);
        json_t *j = get_json(c, key, err);
        if (j == NULL) return err ? err->code : MCDC_E_CORRUPT;
        json_t *rows = json_object_get(j, "rows"), *txn = json_object_get(j, "data_txn");
        bool ok = json_is_integer(rows) && json_integer_value(rows) >= 0;
        if (ok && k == n) out->rows = json_integer_value(rows);
        bool done = true;
        if (ok && json_is_integer(txn) && json_integer_value(txn) <= k)
            out->data_txn = json_integer_value(txn);
        else if (ok && txn == NULL && json_integer_value(rows) > 0)
            out->data_txn = k;
        else if (ok && txn == NULL)
            done = false;
        else
            ok = false;
        json_decref(j);
        if (!ok)
            return mcdc_error_set(err, MCDC_E_CORRUPT,
                                  "%s/%s has no valid \"rows\" or \"data_txn\"; the checkpoint "
                                  "is damaged: restore it from a backup",
                                  c->dir, key);
        if (done) return MCDC_OK;
    }
    return MCDC_OK;
}

int mcdc_checkpoint_write_commit(mcdc_checkpoint *c, int64_t n, const mcdc_ckpt_commit *m,
                                 mcdc_error *err) {
    MCDC_ASSERT(m->data_txn <= n && m->rows >= 0);
    char key[64];
    snprintf(key, sizeof key, "commits/%lld", (long long)n);
    int rc = put_json(c, key,
                      json_pack("{s:I, s:I, s:I}", "batch_id", (json_int_t)n, "rows",
                                (json_int_t)m->rows, "data_txn", (json_int_t)m->data_txn),
                      err);
    return rc == MCDC_E_CONFLICT ? MCDC_OK : rc; /* a replay already marked it */
}

/* ---- one process per checkpoint ---------------------------------------------- */

struct mcdc_ckpt_lock {
    mcdc_storage *st;
    mcdc_storage_lock *hold;
};

int mcdc_checkpoint_lock_check(mcdc_ckpt_lock *l, mcdc_error *err) {
    if (l == NULL) return MCDC_OK;
    int rc = mcdc_storage_lock_check(l->hold, err);
    if (rc)
        mcdc_error_wrap(err, "checkpoint %s: this run no longer holds it and stops before its "
                             "next commit (what it committed stands)",
                        l->st->root);
    return rc;
}

void mcdc_checkpoint_unlock(mcdc_ckpt_lock *l) {
    if (l == NULL) return;
    mcdc_storage_unlock(l->hold);
    mcdc_storage_free(l->st);
    mcdc_free(l);
}

/* "pid N on host H since T, app id A" from a holder's note; what is known. */
static void describe_holder(const mcdc_buf *note, char *out, size_t cap) {
    json_error_t je;
    json_t *j = note->len ? json_loadb((const char *)note->data, note->len, 0, &je) : NULL;
    json_t *pid = json_object_get(j, "pid");
    const char *host = jstr(j, "host"), *since = jstr(j, "since"), *app = jstr(j, "app_id");
    if (json_is_integer(pid))
        snprintf(out, cap, "pid %lld on host %s since %s UTC%s%s", (long long)json_integer_value(pid),
                 host ? host : "?", since ? since : "?", app ? ", app id " : "", app ? app : "");
    else
        snprintf(out, cap, "it is starting: it has not written who it is yet");
    json_decref(j);
}

int mcdc_checkpoint_lock(mcdc_ckpt_lock **out, const mcdc_storage_env *env, const char *dir,
                         const char *job, const char *app_id, mcdc_error *err) {
    MCDC_ASSERT(out && dir && job && app_id);
    *out = NULL;
    mcdc_ckpt_lock *l = mcdc_calloc(1, sizeof *l);
    if (l == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    char host[256] = "", since[32];
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "?");
    mcdc_format_ts_us(mcdc_now_utc_us(), 3, since);
    json_t *note = json_pack("{s:I, s:s, s:s, s:s, s:s}", "pid", (json_int_t)getpid(), "host", host,
                             "since", since, "job", job, "app_id", app_id);
    char *text = note ? json_dumps(note, JSON_COMPACT) : NULL;
    json_decref(note);
    int rc = text ? mcdc_storage_open_env(&l->st, env, dir, err)
                  : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    mcdc_buf holder = {0};
    mcdc_error e = MCDC_ERROR_INIT;
    if (rc == MCDC_OK)
        rc = mcdc_storage_lock_key(&l->hold, l->st, MCDC_CHECKPOINT_LOCK_FILE, text, strlen(text),
                                   &holder, &e);
    free(text);
    if (rc == MCDC_E_CONFLICT) {
        char who[512];
        describe_holder(&holder, who, sizeof who);
        rc = mcdc_error_set(err, MCDC_E_FOREIGN_WRITER,
                            "another process is running on checkpoint %s (%s): a checkpoint "
                            "serves one process at a time, so this run wrote nothing. Wait for "
                            "it to end, or stop it (SIGINT or SIGTERM end it after its current "
                            "batch), then run again (on S3 or Azure a killed process keeps it "
                            "until its lease expires, 60 s after its last renewal unless "
                            "MCDC_LEASE_TTL_MS says otherwise); two jobs need two checkpoints "
                            "and two app ids",
                            dir, who);
    } else if (rc == MCDC_E_UNSUPPORTED) {
        mcdc_log(MCDC_LOG_WARN, "checkpoint %s cannot be locked (%s): a second process on it is "
                                "caught only when it plans or commits a batch",
                 dir, e.message);
        rc = MCDC_OK;
    } else if (rc && e.code) {
        rc = err ? (*err = e, e.code) : e.code;
        mcdc_error_wrap(err, "locking checkpoint %s", dir);
    }
    mcdc_buf_free(&holder);
    if (rc || l->hold == NULL) {
        mcdc_checkpoint_unlock(l);
        return rc;
    }
    *out = l;
    return MCDC_OK;
}

/* ---- the checkpoint as a ledger ---------------------------------------------- */

static const char *l_id(void *c) { return mcdc_checkpoint_id(c); }
static const char *l_name(void *self) {
    mcdc_checkpoint *c = self;
    return c->name;
}
static bool l_fresh(void *c) { return ((mcdc_checkpoint *)c)->fresh; }
static int l_bind(void *c, const mcdc_pos *start, mcdc_error *err) {
    return mcdc_checkpoint_bind(c, start, err);
}
static const mcdc_pos *l_start(void *c) { return mcdc_checkpoint_start(c); }
static int l_last(void *c, int64_t *planned, int64_t *committed, mcdc_error *err) {
    return mcdc_checkpoint_last(c, planned, committed, err);
}
static int l_read_plan(void *c, int64_t n, mcdc_pos *start, mcdc_pos *end, mcdc_error *err) {
    return mcdc_checkpoint_read_plan(c, n, start, end, err);
}
static int l_write_plan(void *c, int64_t n, const mcdc_pos *start, const mcdc_pos *end,
                        mcdc_error *err) {
    return mcdc_checkpoint_write_plan(c, n, start, end, err);
}
static int l_read_commit(void *c, int64_t n, mcdc_ckpt_commit *out, mcdc_error *err) {
    return mcdc_checkpoint_read_commit(c, n, out, err);
}
static int l_write_commit(void *c, int64_t n, const mcdc_ckpt_commit *m, mcdc_error *err) {
    return mcdc_checkpoint_write_commit(c, n, m, err);
}

static const mcdc_ledger_ops CHECKPOINT_LEDGER = {
    .id = l_id,
    .name = l_name,
    .fresh = l_fresh,
    .bind = l_bind,
    .start = l_start,
    .last = l_last,
    .read_plan = l_read_plan,
    .write_plan = l_write_plan,
    .read_commit = l_read_commit,
    .write_commit = l_write_commit,
};

mcdc_ledger mcdc_checkpoint_ledger(mcdc_checkpoint *c) {
    return (mcdc_ledger){&CHECKPOINT_LEDGER, c};
}
