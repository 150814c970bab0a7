/* mcdc_delta_log.c - commit file parsing, protocol checks and log replay. */
#include "mcdc_delta_internal.h"
#include "mcdc_delta_dv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* ------------------------------------------------------------------------ */
/* small helpers                                                            */
/* ------------------------------------------------------------------------ */

void mcdc_delta__commit_key(int64_t version, char out[64]) {
    MCDC_ASSERT(version >= 0);
    snprintf(out, 64, MCDC_DELTA_LOG_DIR "/%020lld.json", (long long)version);
}

void mcdc_delta__uuid(char out[37]) {
    uint8_t b[16];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        /* getrandom on Linux only fails before the pool is initialised;
         * fall back to time and address entropy rather than failing. */
        uint64_t t = (uint64_t)mcdc_now_utc_us() ^ ((uint64_t)mcdc_monotonic_us() << 17);
        uint64_t a = (uint64_t)(uintptr_t)out * 0x9E3779B97F4A7C15ull;
        memcpy(b, &t, 8);
        memcpy(b + 8, &a, 8);
    }
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
    static const char hex[] = "0123456789abcdef";
    int o = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out[o++] = '-';
        out[o++] = hex[b[i] >> 4];
        out[o++] = hex[b[i] & 15];
    }
    out[o] = 0;
}

/* Characters kept as is in a logged path: RFC 2396 unreserved and the
 * pchar/sub-delim set Spark's java.net.URI leaves alone, plus '/'. */
static bool path_char_plain(unsigned char c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
    return c != 0 && strchr("-_.!~*'()/=@,;:$&+", c) != NULL;
}

char *mcdc_delta__path_escape(const char *path) {
    size_t n = strlen(path), extra = 0;
    for (size_t i = 0; i < n; i++)
        if (!path_char_plain((unsigned char)path[i])) extra += 2;
    char *out = mcdc_malloc(n + extra + 1);
    if (out == NULL) return NULL;
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)path[i];
        if (path_char_plain(c)) {
            out[o++] = (char)c;
        } else {
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = 0;
    return out;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

char *mcdc_delta__path_unescape(const char *s) {
    size_t n = strlen(s);
    char *out = mcdc_malloc(n + 1);
    if (out == NULL) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int h, l;
        if (s[i] == '%' && i + 2 < n && (h = hexval(s[i + 1])) >= 0 &&
            (l = hexval(s[i + 2])) >= 0 && (h | l) != 0) {
            out[o++] = (char)(h * 16 + l);
            i += 2;
        } else {
            out[o++] = s[i];
        }
    }
    out[o] = 0;
    return out;
}

/* ------------------------------------------------------------------------ */
/* commit file parsing                                                      */
/* ------------------------------------------------------------------------ */

void mcdc_delta__file_free_strings(mcdc_delta_file *f) {
    mcdc_free((void *)f->path);
    mcdc_free((void *)f->stats_json);
    mcdc_free((void *)f->partition_values_json);
    mcdc_free((void *)f->dv_unique_id);
    mcdc_free((void *)f->dv.path_or_inline);
    memset(f, 0, sizeof *f);
}

void mcdc_delta_actions_clear(mcdc_delta_actions *a) {
    if (a == NULL) return;
    json_decref(a->protocol);
    json_decref(a->metadata);
    json_decref(a->commit_info);
    for (size_t i = 0; i < a->n_adds; i++) mcdc_delta__file_free_strings(&a->adds[i]);
    for (size_t i = 0; i < a->n_removes; i++) mcdc_delta__file_free_strings(&a->removes[i]);
    mcdc_free(a->adds);
    mcdc_free(a->removes);
    for (size_t i = 0; i < a->n_txns; i++) mcdc_free(a->txns[i].app_id);
    mcdc_free(a->txns);
    for (size_t i = 0; i < a->n_domains; i++) {
        mcdc_free(a->domains[i].domain);
        mcdc_free(a->domains[i].configuration);
    }
    mcdc_free(a->domains);
    for (size_t i = 0; i < a->n_sidecars; i++) mcdc_free(a->sidecars[i]);
    mcdc_free(a->sidecars);
    memset(a, 0, sizeof *a);
}

typedef struct parse_ctx {
    const char *label;
    size_t line;
    mcdc_error *err;
} parse_ctx;

static int corrupt(parse_ctx *c, const char *fmt, const char *what, const char *field) {
    char msg[256];
    snprintf(msg, sizeof msg, fmt, what, field);
    return mcdc_error_set(c->err, MCDC_E_CORRUPT, "%s line %zu: %s", c->label, c->line, msg);
}

static int nomem(parse_ctx *c) {
    return mcdc_error_set(c->err, MCDC_E_NOMEM, "out of memory parsing %s", c->label);
}

/* Grows *arr (of elem bytes) to hold one more element. */
static int grow(void **arr, size_t n, size_t elem) {
    if ((n & (n - 1)) != 0 && n != 0) return MCDC_OK; /* not a power of two: room left */
    size_t cap = n == 0 ? 4 : n * 2;
    void *p = mcdc_realloc(*arr, cap * elem);
    if (p == NULL) return MCDC_E_NOMEM;
    *arr = p;
    return MCDC_OK;
}

static int get_string(parse_ctx *c, const json_t *o, const char *what, const char *field,
                      bool required, const char **out) {
    json_t *v = json_object_get(o, field);
    *out = NULL;
    if (v == NULL || json_is_null(v)) {
        if (required) return corrupt(c, "%s without required field \"%s\"", what, field);
        return MCDC_OK;
    }
    if (!json_is_string(v)) return corrupt(c, "%s field \"%s\" is not a string", what, field);
    *out = json_string_value(v);
    return MCDC_OK;
}

static int get_int(parse_ctx *c, const json_t *o, const char *what, const char *field,
                   bool required, int64_t *out) {
    json_t *v = json_object_get(o, field);
    if (v == NULL || json_is_null(v)) {
        if (required) return corrupt(c, "%s without required field \"%s\"", what, field);
        return MCDC_OK;
    }
    if (!json_is_integer(v)) return corrupt(c, "%s field \"%s\" is not an integer", what, field);
    *out = (int64_t)json_integer_value(v);
    return MCDC_OK;
}

static int get_bool(parse_ctx *c, const json_t *o, const char *what, const char *field,
                    bool required, bool *out) {
    json_t *v = json_object_get(o, field);
    if (v == NULL || json_is_null(v)) {
        if (required) return corrupt(c, "%s without required field \"%s\"", what, field);
        return MCDC_OK;
    }
    if (!json_is_boolean(v)) return corrupt(c, "%s field \"%s\" is not a boolean", what, field);
    *out = json_is_true(v);
    return MCDC_OK;
}

static int parse_file(parse_ctx *c, const json_t *o, bool is_add, mcdc_delta_file *f) {
    const char *what = is_add ? "add" : "remove";
    memset(f, 0, sizeof *f);
    f->size_bytes = -1;
    f->modification_time_ms = -1;
    f->deletion_timestamp_ms = -1;
    const char *path, *stats = NULL;
    int rc = get_string(c, o, what, "path", true, &path);
    if (!rc) rc = get_bool(c, o, what, "dataChange", true, &f->data_change);
    if (!rc) rc = get_int(c, o, what, "size", is_add, &f->size_bytes);
    if (!rc && is_add) rc = get_int(c, o, what, "modificationTime", true, &f->modification_time_ms);
    if (!rc && !is_add)
        rc = get_int(c, o, what, "deletionTimestamp", false, &f->deletion_timestamp_ms);
    if (!rc) rc = get_string(c, o, what, "stats", false, &stats);
    if (rc) return rc;
    if (path[0] == 0) return corrupt(c, "%s has an empty \"%s\"", what, "path");
    if (f->size_bytes < -1 || (is_add && f->size_bytes < 0))
        return corrupt(c, "%s has a negative \"%s\"", what, "size");
    f->path = mcdc_delta__path_unescape(path);
    if (f->path == NULL) return nomem(c);
    if (stats && (f->stats_json = mcdc_strdup(stats)) == NULL) return nomem(c);
    json_t *pv = json_object_get(o, "partitionValues");
    if (pv && !json_is_null(pv)) {
        if (!json_is_object(pv))
            return corrupt(c, "%s field \"%s\" is not an object", what, "partitionValues");
        if (json_object_size(pv) > 0) {
            char *s = json_dumps(pv, JSON_COMPACT);
            if (s == NULL) return nomem(c);
            f->partition_values_json = mcdc_strdup(s);
            free(s);
            if (f->partition_values_json == NULL) return nomem(c);
        }
    }
    json_t *dv = json_object_get(o, "deletionVector");
    if (dv && !json_is_null(dv)) {
        if (!json_is_object(dv))
            return corrupt(c, "%s field \"%s\" is not an object", what, "deletionVector");
        const char *st, *pod;
        int64_t size = -1;
        f->dv.offset = -1;
        f->dv.max_row_index = -1;
        rc = get_string(c, dv, "deletionVector", "storageType", true, &st);
        if (!rc) rc = get_string(c, dv, "deletionVector", "pathOrInlineDv", true, &pod);
        if (!rc) rc = get_int(c, dv, "deletionVector", "offset", false, &f->dv.offset);
        if (!rc) rc = get_int(c, dv, "deletionVector", "sizeInBytes", true, &size);
        if (!rc) rc = get_int(c, dv, "deletionVector", "cardinality", true, &f->dv.cardinality);
        if (!rc) rc = get_int(c, dv, "deletionVector", "maxRowIndex", false, &f->dv.max_row_index);
        if (rc) return rc;
        if (strlen(st) != 1) return corrupt(c, "%s field \"%s\" is not one character",
                                            "deletionVector", "storageType");
        if (size < 0 || size > INT32_MAX)
            return corrupt(c, "%s field \"%s\" is out of range", "deletionVector", "sizeInBytes");
        f->dv.storage_type = st[0];
        f->dv.size_bytes = (int32_t)size;
        if ((f->dv.path_or_inline = mcdc_strdup(pod)) == NULL) return nomem(c);
        char where[700];
        snprintf(where, sizeof where, "%s line %zu: %s of %s", c->label, c->line, what, f->path);
        rc = mcdc_dv_check_descriptor((char **)&f->dv_unique_id, &f->dv, where, c->err);
        if (rc) return rc;
    }
    return MCDC_OK;
}

static int parse_action(parse_ctx *c, const char *key, json_t *v, mcdc_delta_actions *a) {
    bool known = strcmp(key, "protocol") == 0 || strcmp(key, "metaData") == 0 ||
                 strcmp(key, "add") == 0 || strcmp(key, "remove") == 0 ||
                 strcmp(key, "txn") == 0 || strcmp(key, "commitInfo") == 0 ||
                 strcmp(key, "domainMetadata") == 0;
    if (strcmp(key, "sidecar") == 0 && json_is_object(v)) { /* V2 checkpoints only */
        const char *sp;
        int rc = get_string(c, v, "sidecar", "path", true, &sp);
        if (rc) return rc;
        if (grow((void **)&a->sidecars, a->n_sidecars, sizeof *a->sidecars) ||
            (a->sidecars[a->n_sidecars] = mcdc_strdup(sp)) == NULL)
            return nomem(c);
        a->n_sidecars++;
        return MCDC_OK;
    }
    if (!known) {
        a->n_unknown++; /* cdc, checkpointMetadata, future actions */
        return MCDC_OK;
    }
    if (!json_is_object(v)) return corrupt(c, "action \"%s\" is not an object%s", key, "");
    int rc;
    if (strcmp(key, "protocol") == 0) {
        if (a->protocol) return corrupt(c, "two %s actions in one commit%s", key, "");
        int64_t r = 0, w = 0;
        rc = get_int(c, v, "protocol", "minReaderVersion", true, &r);
        if (!rc) rc = get_int(c, v, "protocol", "minWriterVersion", true, &w);
        if (rc) return rc;
        if (r < 1 || w < 1) return corrupt(c, "%s versions must be >= 1%s", key, "");
        a->protocol = json_incref(v);
    } else if (strcmp(key, "metaData") == 0) {
        if (a->metadata) return corrupt(c, "two %s actions in one commit%s", key, "");
        const char *s;
        rc = get_string(c, v, "metaData", "id", true, &s);
        if (!rc) rc = get_string(c, v, "metaData", "schemaString", true, &s);
        if (rc) return rc;
        json_t *pc = json_object_get(v, "partitionColumns");
        if (pc && !json_is_array(pc))
            return corrupt(c, "%s field \"%s\" is not an array", key, "partitionColumns");
        json_t *cf = json_object_get(v, "configuration");
        if (cf && !json_is_null(cf) && !json_is_object(cf))
            return corrupt(c, "%s field \"%s\" is not an object", key, "configuration");
        json_t *fmt = json_object_get(v, "format");
        if (fmt && json_is_object(fmt)) {
            const char *prov = NULL;
            rc = get_string(c, fmt, "metaData.format", "provider", false, &prov);
            if (rc) return rc;
            if (prov && strcmp(prov, "parquet") != 0)
                return mcdc_error_set(c->err, MCDC_E_UNSUPPORTED,
                                      "%s line %zu: data file format \"%s\" is not parquet",
                                      c->label, c->line, prov);
        }
        a->metadata = json_incref(v);
    } else if (strcmp(key, "commitInfo") == 0) {
        if (a->commit_info) return corrupt(c, "two %s actions in one commit%s", key, "");
        a->commit_info = json_incref(v);
    } else if (strcmp(key, "add") == 0 || strcmp(key, "remove") == 0) {
        bool is_add = key[0] == 'a';
        mcdc_delta_file **arr = is_add ? &a->adds : &a->removes;
        size_t *n = is_add ? &a->n_adds : &a->n_removes;
        if (grow((void **)arr, *n, sizeof **arr)) return nomem(c);
        mcdc_delta_file *f = &(*arr)[*n];
        rc = parse_file(c, v, is_add, f);
        (*n)++; /* counted even on failure so that clear frees its strings */
        if (rc) return rc;
    } else if (strcmp(key, "txn") == 0) {
        const char *app;
        int64_t ver = 0, lu = -1;
        rc = get_string(c, v, "txn", "appId", true, &app);
        if (!rc) rc = get_int(c, v, "txn", "version", true, &ver);
        if (!rc) rc = get_int(c, v, "txn", "lastUpdated", false, &lu);
        if (rc) return rc;
        for (size_t i = 0; i < a->n_txns; i++)
            if (strcmp(a->txns[i].app_id, app) == 0)
                return corrupt(c, "two txn actions for appId \"%s\" in one commit%s", app, "");
        if (grow((void **)&a->txns, a->n_txns, sizeof *a->txns)) return nomem(c);
        delta_txn *t = &a->txns[a->n_txns];
        t->app_id = mcdc_strdup(app);
        if (t->app_id == NULL) return nomem(c);
        t->version = ver;
        t->last_updated_ms = lu;
        a->n_txns++;
    } else {
        const char *dom, *conf;
        bool removed = false;
        rc = get_string(c, v, "domainMetadata", "domain", true, &dom);
        if (!rc) rc = get_string(c, v, "domainMetadata", "configuration", true, &conf);
        if (!rc) rc = get_bool(c, v, "domainMetadata", "removed", false, &removed);
        if (rc) return rc;
        if (grow((void **)&a->domains, a->n_domains, sizeof *a->domains)) return nomem(c);
        delta_domain *d = &a->domains[a->n_domains];
        d->domain = mcdc_strdup(dom);
        d->configuration = mcdc_strdup(conf);
        d->removed = removed;
        a->n_domains++;
        if (d->domain == NULL || d->configuration == NULL) return nomem(c);
    }
    return MCDC_OK;
}

int mcdc_delta_actions_parse(mcdc_delta_actions *out, const char *data, size_t n,
                             const char *label, mcdc_error *err) {
    memset(out, 0, sizeof *out);
    if (n > MCDC_DELTA_COMMIT_BYTES_MAX)
        return mcdc_error_set(err, MCDC_E_LIMIT, "%s is %zu bytes, more than the %u allowed",
                              label, n, MCDC_DELTA_COMMIT_BYTES_MAX);
    parse_ctx c = {label, 0, err};
    size_t pos = 0, actions = 0;
    int rc = MCDC_OK;
    while (pos < n && rc == MCDC_OK) {
        const char *line = data + pos;
        const char *nl = memchr(line, '\n', n - pos);
        size_t len = nl ? (size_t)(nl - line) : n - pos;
        pos += len + (nl ? 1 : 0);
        c.line++;
        size_t b = 0, e = len;
        while (b < e && (line[b] == ' ' || line[b] == '\t' || line[b] == '\r')) b++;
        while (e > b && (line[e - 1] == ' ' || line[e - 1] == '\t' || line[e - 1] == '\r')) e--;
        if (b == e) continue;
        json_error_t je;
        json_t *root = json_loadb(line + b, e - b, 0, &je);
        if (root == NULL) {
            rc = mcdc_error_set(err, MCDC_E_CORRUPT,
                                "%s line %zu is not valid JSON (%s at column %d): the commit "
                                "file is corrupt or truncated; restore it from a backup",
                                label, c.line, je.text, je.column);
            break;
        }
        if (!json_is_object(root)) {
            rc = corrupt(&c, "an action line must be a JSON object%s%s", "", "");
        } else {
            const char *key;
            json_t *v;
            json_object_foreach(root, key, v) {
                rc = parse_action(&c, key, v, out);
                if (rc) break;
            }
            actions++;
        }
        json_decref(root);
    }
    if (rc == MCDC_OK && actions == 0)
        rc = mcdc_error_set(err, MCDC_E_CORRUPT, "%s holds no action (empty commit file)",
                            label);
    if (rc) mcdc_delta_actions_clear(out);
    return rc;
}

int mcdc_delta__read_commit(mcdc_delta_actions *out, mcdc_storage *st, int64_t version,
                            mcdc_error *err) {
    memset(out, 0, sizeof *out);
    char key[64];
    mcdc_delta__commit_key(version, key);
    mcdc_buf b = {0};
    b.limit = MCDC_DELTA_COMMIT_BYTES_MAX + 1u;
    int rc = mcdc_storage_get(st, key, MCDC_DELTA_COMMIT_BYTES_MAX, &b, err);
    if (rc == MCDC_OK) {
        char label[600];
        snprintf(label, sizeof label, "%s/%s (version %lld)", st->root, key, (long long)version);
        rc = mcdc_delta_actions_parse(out, b.data ? (const char *)b.data : "", b.len, label,
                                      err);
    }
    mcdc_buf_free(&b);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* protocol                                                                 */
/* ------------------------------------------------------------------------ */

static bool in_list(const char *name, const char *const *list) {
    for (; *list; list++)
        if (strcmp(name, *list) == 0) return true;
    return false;
}

static const char *config_get(const json_t *metadata, const char *key) {
    json_t *cf = metadata ? json_object_get(metadata, "configuration") : NULL;
    json_t *v = cf ? json_object_get(cf, key) : NULL;
    return v && json_is_string(v) ? json_string_value(v) : NULL;
}

int mcdc_delta__check_protocol(const json_t *protocol, const json_t *metadata, bool write,
                               const char *where, mcdc_error *err) {
    if (protocol == NULL)
        return mcdc_error_set(err, MCDC_E_CORRUPT, "%s: the log has no protocol action", where);
    int64_t r = (int64_t)json_integer_value(json_object_get(protocol, "minReaderVersion"));
    int64_t w = (int64_t)json_integer_value(json_object_get(protocol, "minWriterVersion"));
    static const char *const read_ok[] = {"timestampNtz", "columnMapping", "deletionVectors",
                                          "vacuumProtocolCheck", "v2Checkpoint", NULL};
    static const char *const write_ok[] = {"appendOnly", "invariants", "timestampNtz",
                                           "domainMetadata", "vacuumProtocolCheck",
                                           "changeDataFeed", "checkConstraints",
                                           "generatedColumns", "deletionVectors",
                                           "columnMapping", NULL};
    if (r > 3)
        return mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                              "%s: minReaderVersion %lld is newer than the 3 we read; use a "
                              "newer mssql-cdc",
                              where, (long long)r);
    json_t *rf = json_object_get(protocol, "readerFeatures");
    if (r == 3) {
        size_t i;
        json_t *f;
        json_array_foreach(rf, i, f) {
            const char *name = json_string_value(f);
            if (name == NULL || !in_list(name, read_ok))
                return mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                                      "%s: reader feature \"%s\" is not supported by mssql-cdc",
                                      where, name ? name : "(not a string)");
        }
    }
    const char *mode = config_get(metadata, "delta.columnMapping.mode");
    if (mode && strcmp(mode, "none") != 0 && strcmp(mode, "name") != 0)
        return mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                              "%s: column mapping mode \"%s\" is not supported (only \"name\")",
                              where, mode);
    if (!write) return MCDC_OK;
    if (w > 7 || w == 6)
        return mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                              "%s: minWriterVersion %lld is not supported for writing (we "
                              "write up to 5, and 7 with known features)",
                              where, (long long)w);
    if (w == 7) {
        json_t *wf = json_object_get(protocol, "writerFeatures");
        size_t i;
        json_t *f;
        json_array_foreach(wf, i, f) {
            const char *name = json_string_value(f);
            if (name == NULL || !in_list(name, write_ok))
                return mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                                      "%s: writer feature \"%s\" is not supported by mssql-cdc",
                                      where, name ? name : "(not a string)");
        }
    }
    /* Features we accept only while unused: we cannot enforce them. */
    const char *schema = metadata ? json_string_value(json_object_get(metadata, "schemaString"))
                                  : NULL;
    static const char *const unenforced[] = {"delta.invariants", "delta.generationExpression",
                                             "delta.identity", NULL};
    for (const char *const *u = unenforced; schema && *u; u++)
        if (strstr(schema, *u))
            return mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                                  "%s: the schema uses %s, which mssql-cdc cannot enforce on "
                                  "write",
                                  where, *u);
    json_t *cf = metadata ? json_object_get(metadata, "configuration") : NULL;
    const char *k;
    json_t *v;
    json_object_foreach(cf, k, v) {
        if (strncmp(k, "delta.constraints.", 18) == 0)
            return mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                                  "%s: CHECK constraint %s cannot be enforced by mssql-cdc",
                                  where, k + 18);
    }
    return MCDC_OK;
}

/* ------------------------------------------------------------------------ */
/* snapshots                                                                */
/* ------------------------------------------------------------------------ */

typedef struct file_entry {
    mcdc_delta_file f; /* strings owned */
    char *key;         /* owned: path, or path "\n" dv unique id */
    bool live;
} file_entry;

struct mcdc_delta_snapshot {
    int64_t version;   /* -1 before the first commit */
    json_t *protocol;  /* owned reference */
    json_t *metadata;  /* owned reference */
    file_entry *files;
    size_t n_files;
    size_t cap_files;
    uint32_t *slots; /* open addressing: files index + 1, 0 = empty */
    size_t n_slots;
    file_entry **live_order; /* live files sorted by path (built by finalize) */
    bool unsettled;          /* actions applied since the last finalize: live_order is stale
                                (its pointers may point into a moved files array) */
    size_t n_live;
    size_t *tomb_order; /* tombstones in file order */
    size_t n_tomb;
    delta_txn *txns;
    size_t n_txns;
    delta_domain *domains;
    size_t n_domains;
};

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

int mcdc_delta__snapshot_new(mcdc_delta_snapshot **out, mcdc_error *err) {
    *out = mcdc_calloc(1, sizeof **out);
    if (*out == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    (*out)->version = -1;
    return MCDC_OK;
}

void mcdc_delta_snapshot_free(mcdc_delta_snapshot *s) {
    if (s == NULL) return;
    json_decref(s->protocol);
    json_decref(s->metadata);
    for (size_t i = 0; i < s->n_files; i++) {
        mcdc_delta__file_free_strings(&s->files[i].f);
        mcdc_free(s->files[i].key);
    }
    mcdc_free(s->files);
    mcdc_free(s->slots);
    mcdc_free(s->live_order);
    mcdc_free(s->tomb_order);
    for (size_t i = 0; i < s->n_txns; i++) mcdc_free(s->txns[i].app_id);
    mcdc_free(s->txns);
    for (size_t i = 0; i < s->n_domains; i++) {
        mcdc_free(s->domains[i].domain);
        mcdc_free(s->domains[i].configuration);
    }
    mcdc_free(s->domains);
    mcdc_free(s);
}

/* Duplicates str into *dst; false only when str was not NULL and the copy
 * failed (out of memory). */
static bool copy_str(const char **dst, const char *str) {
    *dst = str ? mcdc_strdup(str) : NULL;
    return str == NULL || *dst != NULL;
}

static bool copy_file_strings(mcdc_delta_file *dst, const mcdc_delta_file *src) {
    *dst = *src;
    dst->path = dst->stats_json = dst->partition_values_json = dst->dv_unique_id = NULL;
    dst->dv.path_or_inline = NULL;
    bool ok = copy_str(&dst->path, src->path);
    ok = ok && copy_str(&dst->stats_json, src->stats_json);
    ok = ok && copy_str(&dst->partition_values_json, src->partition_values_json);
    ok = ok && copy_str(&dst->dv_unique_id, src->dv_unique_id);
    return ok && copy_str(&dst->dv.path_or_inline, src->dv.path_or_inline);
}

/* Every array of s sized as in s (the counts set only once the copies are
 * made, so that a failure half way frees exactly what was made). */
static bool copy_arrays(mcdc_delta_snapshot *c, const mcdc_delta_snapshot *s) {
    size_t nf = s->n_files ? s->n_files : 1;
    c->files = mcdc_calloc(nf, sizeof *c->files);
    c->slots = s->n_slots ? mcdc_malloc(s->n_slots * sizeof *c->slots) : NULL;
    c->live_order = mcdc_malloc(nf * sizeof *c->live_order);
    c->tomb_order = mcdc_malloc(nf * sizeof *c->tomb_order);
    c->txns = mcdc_calloc(s->n_txns ? s->n_txns : 1, sizeof *c->txns);
    c->domains = mcdc_calloc(s->n_domains ? s->n_domains : 1, sizeof *c->domains);
    if (!c->files || (s->n_slots && !c->slots) || !c->live_order || !c->tomb_order ||
        !c->txns || !c->domains)
        return false;
    c->cap_files = nf;
    for (; c->n_files < s->n_files; c->n_files++) {
        file_entry *d = &c->files[c->n_files];
        const file_entry *e = &s->files[c->n_files];
        d->live = e->live;
        bool ok = copy_file_strings(&d->f, &e->f);
        d->key = mcdc_strdup(e->key);
        if (!ok || d->key == NULL) {
            c->n_files++; /* its strings made so far are freed with the copy */
            return false;
        }
    }
    for (; c->n_txns < s->n_txns; c->n_txns++) {
        c->txns[c->n_txns] = s->txns[c->n_txns];
        if ((c->txns[c->n_txns].app_id = mcdc_strdup(s->txns[c->n_txns].app_id)) == NULL)
            return false;
    }
    for (; c->n_domains < s->n_domains; c->n_domains++) {
        const delta_domain *e = &s->domains[c->n_domains];
        delta_domain *d = &c->domains[c->n_domains];
        d->removed = e->removed;
        d->domain = mcdc_strdup(e->domain);
        d->configuration = e->configuration ? mcdc_strdup(e->configuration) : NULL;
        if (d->domain == NULL || (e->configuration && d->configuration == NULL)) {
            c->n_domains++;
            return false;
        }
    }
    if (s->n_slots) memcpy(c->slots, s->slots, s->n_slots * sizeof *c->slots);
    c->n_slots = s->n_slots;
    for (size_t i = 0; i < s->n_live; i++) /* the same order, pointing into the copy */
        c->live_order[i] = &c->files[s->live_order[i] - s->files];
    c->n_live = s->n_live;
    if (s->n_tomb) memcpy(c->tomb_order, s->tomb_order, s->n_tomb * sizeof *c->tomb_order);
    c->n_tomb = s->n_tomb;
    return true;
}

int mcdc_delta_snapshot_copy(mcdc_delta_snapshot **out, const mcdc_delta_snapshot *s,
                             mcdc_error *err) {
    *out = NULL;
    MCDC_ASSERT(!s->unsettled);
    mcdc_delta_snapshot *c;
    int rc = mcdc_delta__snapshot_new(&c, err);
    if (rc) return rc;
    c->version = s->version;
    /* deep copies: the copy may be read on other threads while the
     * original's JSON is released or replaced */
    c->protocol = s->protocol ? json_deep_copy(s->protocol) : NULL;
    c->metadata = s->metadata ? json_deep_copy(s->metadata) : NULL;
    if ((s->protocol && !c->protocol) || (s->metadata && !c->metadata) || !copy_arrays(c, s)) {
        mcdc_delta_snapshot_free(c);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory copying a snapshot of version %lld",
                              (long long)s->version);
    }
    MCDC_ASSERT(c->n_files == s->n_files && c->n_live == s->n_live);
    MCDC_ASSERT(c->n_txns == s->n_txns && c->n_domains == s->n_domains);
    *out = c;
    return MCDC_OK;
}

static int rehash(mcdc_delta_snapshot *s, mcdc_error *err) {
    size_t n = s->n_slots ? s->n_slots * 2 : 256;
    uint32_t *slots = mcdc_calloc(n, sizeof *slots);
    if (slots == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    for (size_t i = 0; i < s->n_files; i++) {
        size_t h = (size_t)hash_str(s->files[i].key) & (n - 1);
        while (slots[h]) h = (h + 1) & (n - 1);
        slots[h] = (uint32_t)(i + 1);
    }
    mcdc_free(s->slots);
    s->slots = slots;
    s->n_slots = n;
    return MCDC_OK;
}

/* Finds the entry of key, or the slot where it goes (*slot). */
static file_entry *find_entry(mcdc_delta_snapshot *s, const char *key, size_t *slot) {
    size_t h = (size_t)hash_str(key) & (s->n_slots - 1);
    while (s->slots[h]) {
        file_entry *e = &s->files[s->slots[h] - 1];
        if (strcmp(e->key, key) == 0) {
            *slot = h;
            return e;
        }
        h = (h + 1) & (s->n_slots - 1);
    }
    *slot = h;
    return NULL;
}

static char *dup_or_null(const char *s, bool *oom) {
    if (s == NULL) return NULL;
    char *d = mcdc_strdup(s);
    if (d == NULL) *oom = true;
    return d;
}

/* Records an add (live) or remove (tombstone) of f. */
static int apply_file(mcdc_delta_snapshot *s, const mcdc_delta_file *f, bool live,
                      mcdc_error *err) {
    if (s->n_files >= UINT32_MAX - 1)
        return mcdc_error_set(err, MCDC_E_LIMIT, "more than 4 billion files in one table");
    if ((s->n_files + 1) * 2 > s->n_slots) {
        int rc = rehash(s, err);
        if (rc) return rc;
    }
    char *key = f->dv_unique_id ? mcdc_asprintf("%s\n%s", f->path, f->dv_unique_id)
                                : mcdc_strdup(f->path);
    if (key == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    size_t slot;
    file_entry *e = find_entry(s, key, &slot);
    if (e == NULL) {
        if (s->n_files == s->cap_files) {
            size_t cap = s->cap_files ? s->cap_files * 2 : 64;
            file_entry *nf = mcdc_realloc(s->files, cap * sizeof *nf);
            if (nf == NULL) {
                mcdc_free(key);
                return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
            }
            s->files = nf;
            s->cap_files = cap;
        }
        e = &s->files[s->n_files];
        memset(e, 0, sizeof *e);
        e->key = key;
        s->slots[slot] = (uint32_t)(s->n_files + 1);
        s->n_files++;
    } else {
        mcdc_free(key);
        /* A remove keeps what the add told (size, stats) when it has less. */
        if (!live) {
            e->live = false;
            e->f.data_change = f->data_change;
            e->f.deletion_timestamp_ms = f->deletion_timestamp_ms;
            if (f->size_bytes >= 0) e->f.size_bytes = f->size_bytes;
            return MCDC_OK;
        }
        mcdc_delta__file_free_strings(&e->f);
    }
    bool oom = false;
    e->f = *f;
    e->f.path = dup_or_null(f->path, &oom);
    e->f.stats_json = dup_or_null(f->stats_json, &oom);
    e->f.partition_values_json = dup_or_null(f->partition_values_json, &oom);
    e->f.dv_unique_id = dup_or_null(f->dv_unique_id, &oom);
    e->f.dv.path_or_inline = dup_or_null(f->dv.path_or_inline, &oom);
    e->live = live;
    if (oom) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    return MCDC_OK;
}

int mcdc_delta__snapshot_apply(mcdc_delta_snapshot *s, const mcdc_delta_actions *a,
                               int64_t version, mcdc_error *err) {
    MCDC_ASSERT(version == s->version + 1 || (s->version < 0 && version >= 0));
    s->unsettled = true;
    if (version == 0 && (a->protocol == NULL || a->metadata == NULL))
        return mcdc_error_set(err, MCDC_E_CORRUPT,
                              "version 0 lacks a %s action: not a Delta table creation",
                              a->protocol == NULL ? "protocol" : "metaData");
    if (a->protocol) {
        json_decref(s->protocol);
        s->protocol = json_incref(a->protocol);
    }
    if (a->metadata) {
        json_decref(s->metadata);
        s->metadata = json_incref(a->metadata);
    }
    int rc = MCDC_OK;
    for (size_t i = 0; i < a->n_removes && !rc; i++) rc = apply_file(s, &a->removes[i], false, err);
    for (size_t i = 0; i < a->n_adds && !rc; i++) rc = apply_file(s, &a->adds[i], true, err);
    if (rc) return rc;
    for (size_t i = 0; i < a->n_txns; i++) {
        const delta_txn *t = &a->txns[i];
        size_t j = 0;
        while (j < s->n_txns && strcmp(s->txns[j].app_id, t->app_id) != 0) j++;
        if (j == s->n_txns) {
            if (grow((void **)&s->txns, s->n_txns, sizeof *s->txns) ||
                (s->txns[j].app_id = mcdc_strdup(t->app_id)) == NULL)
                return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
            s->n_txns++;
        }
        s->txns[j].version = t->version;
        s->txns[j].last_updated_ms = t->last_updated_ms;
    }
    for (size_t i = 0; i < a->n_domains; i++) {
        const delta_domain *d = &a->domains[i];
        size_t j = 0;
        while (j < s->n_domains && strcmp(s->domains[j].domain, d->domain) != 0) j++;
        if (j == s->n_domains) {
            if (grow((void **)&s->domains, s->n_domains, sizeof *s->domains) ||
                (s->domains[j].domain = mcdc_strdup(d->domain)) == NULL)
                return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
            s->domains[j].configuration = NULL;
            s->n_domains++;
        }
        char *conf = mcdc_strdup(d->configuration);
        if (conf == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        mcdc_free(s->domains[j].configuration);
        s->domains[j].configuration = conf;
        s->domains[j].removed = d->removed;
    }
    s->version = version;
    return MCDC_OK;
}

static int cmp_live(const void *a, const void *b) {
    const file_entry *x = *(file_entry *const *)a;
    const file_entry *y = *(file_entry *const *)b;
    int c = strcmp(x->f.path, y->f.path);
    return c ? c : strcmp(x->key, y->key);
}

static int finalize(mcdc_delta_snapshot *s, mcdc_error *err) {
    s->unsettled = true; /* until the orders below are whole */
    mcdc_free(s->live_order);
    mcdc_free(s->tomb_order);
    s->live_order = NULL;
    s->tomb_order = NULL;
    s->n_live = s->n_tomb = 0;
    if (s->n_files) {
        s->live_order = mcdc_malloc(s->n_files * sizeof *s->live_order);
        s->tomb_order = mcdc_malloc(s->n_files * sizeof *s->tomb_order);
        if (s->live_order == NULL || s->tomb_order == NULL)
            return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < s->n_files; i++) {
        if (s->files[i].live) s->live_order[s->n_live++] = &s->files[i];
        else s->tomb_order[s->n_tomb++] = i;
    }
    if (s->n_live > 1) qsort(s->live_order, s->n_live, sizeof *s->live_order, cmp_live);
    s->unsettled = false;
    return MCDC_OK;
}

/* A name in _delta_log: "<20 digits>.json" -> commit; "<20 digits>.checkpoint..." -> cp. */
static bool parse_log_name(const char *name, int64_t *version, const char **rest) {
    for (int i = 0; i < 20; i++)
        if (name[i] < '0' || name[i] > '9') return false;
    if (name[20] != '.') return false;
    char digits[21];
    memcpy(digits, name, 20);
    digits[20] = 0;
    if (mcdc_parse_i64(digits, version) != MCDC_OK) return false;
    *rest = name + 21;
    return true;
}

typedef struct log_listing {
    int64_t *commits; /* sorted ascending */
    size_t n_commits;
    delta_checkpoint_ref cp; /* newest complete checkpoint <= target; version -1 none */
} log_listing;

/* Multi-part names: "<O 10 digits>.<P 10 digits>.parquet". */
static bool parse_part(const char *rest, int32_t *o, int32_t *p) {
    if (strlen(rest) != 29 || rest[10] != '.' || rest[21] != '.' ||
        strcmp(rest + 21, ".parquet") != 0)
        return false;
    for (int i = 0; i < 21; i++)
        if (i != 10 && (rest[i] < '0' || rest[i] > '9')) return false;
    *o = (int32_t)strtol(rest, NULL, 10);
    *p = (int32_t)strtol(rest + 11, NULL, 10);
    return *o >= 1 && *p >= 1 && *o <= *p;
}

/* Lists the log into out: every name when from < 1, else only the names of
 * versions from `from` on (after "<from - 1>~", which sorts after every name
 * of version from - 1 and before from's): one page for a long log's tail. */
static int list_log(log_listing *out, mcdc_storage *st, int64_t target, int64_t from,
                    mcdc_error *err) {
    memset(out, 0, sizeof *out);
    out->cp.version = -1;
    mcdc_storage_listing l = {0};
    char after[32];
    if (from > 0) snprintf(after, sizeof after, "%020lld~", (long long)(from - 1));
    int rc = mcdc_storage_list_after(st, MCDC_DELTA_LOG_DIR "/", from > 0 ? after : NULL, &l,
                                     err);
    if (rc) return rc;
    if (l.count) {
        out->commits = mcdc_malloc(l.count * sizeof *out->commits);
        if (out->commits == NULL) {
            mcdc_storage_listing_free(&l);
            return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        }
    }
    /* Multi-part sets are complete only with every part; names sort by
     * version then part, so a set's parts are adjacent. */
    int64_t mp_version = -1;
    int32_t mp_total = 0, mp_seen = 0;
    for (size_t i = 0; i < l.count; i++) {
        int64_t v;
        const char *rest;
        if (!parse_log_name(l.entries[i].name, &v, &rest)) continue;
        if (strcmp(rest, "json") == 0) {
            out->commits[out->n_commits++] = v;
            continue;
        }
        if (strncmp(rest, "checkpoint.", 11) != 0 || (target >= 0 && v > target) ||
            v < out->cp.version)
            continue;
        rest += 11;
        delta_checkpoint_ref ref = {v, 1, "", false, l.entries[i].size};
        int32_t o, p;
        size_t n = strlen(rest);
        if (strcmp(rest, "parquet") == 0) {
            /* classic single file */
        } else if (parse_part(rest, &o, &p)) {
            if (v != mp_version || p != mp_total) {
                mp_version = v;
                mp_total = p;
                mp_seen = 0;
            }
            if (o != mp_seen + 1) continue;
            mp_seen = o;
            if (mp_seen != mp_total) continue;
            ref.n_parts = p;
            ref.bytes = -1;
        } else if (n > 8 && n < sizeof ref.uuid + 8 &&
                   (strcmp(rest + n - 8, ".parquet") == 0 || strcmp(rest + n - 5, ".json") == 0)) {
            ref.is_json = strcmp(rest + n - 5, ".json") == 0;
            size_t ul = n - (ref.is_json ? 5 : 8);
            memcpy(ref.uuid, rest, ul);
            ref.uuid[ul] = 0;
            if (strchr(ref.uuid, '.') != NULL) continue;
        } else {
            continue;
        }
        /* Equal versions: keep the first complete one found. */
        if (v > out->cp.version) out->cp = ref;
    }
    mcdc_storage_listing_free(&l);
    return MCDC_OK;
}

/* An optional non-negative integer member: -1 when absent; false when it is
 * there but not such an integer. */
static bool hint_count(const json_t *o, const char *name, int64_t *out) {
    const json_t *v = json_object_get(o, name);
    *out = -1;
    if (v == NULL || json_is_null(v)) return true;
    if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
    *out = (int64_t)json_integer_value(v);
    return true;
}

int mcdc_delta__last_checkpoint_parse(delta_last_checkpoint *out, const void *data, size_t len,
                                      mcdc_error *err) {
    out->version = out->size = out->size_bytes = -1;
    out->parts = 0;
    json_error_t je;
    json_t *j = json_loadb(len ? (const char *)data : "", len, JSON_REJECT_DUPLICATES, &je);
    int rc = MCDC_OK;
    int64_t version = -1, size = -1, size_bytes = -1, adds = -1, parts = -1;
    if (j == NULL || !json_is_object(j))
        rc = mcdc_error_set(err, MCDC_E_CORRUPT, "not a JSON object%s%s",
                            j == NULL ? ": " : "", j == NULL ? je.text : "");
    else if (!json_is_integer(json_object_get(j, "version")) ||
             !hint_count(j, "version", &version))
        rc = mcdc_error_set(err, MCDC_E_CORRUPT, "no \"version\" that is an integer >= 0");
    else if (!hint_count(j, "size", &size) || !hint_count(j, "sizeInBytes", &size_bytes) ||
             !hint_count(j, "numOfAddFiles", &adds) || !hint_count(j, "parts", &parts))
        rc = mcdc_error_set(err, MCDC_E_CORRUPT,
                            "\"size\", \"sizeInBytes\", \"numOfAddFiles\" or \"parts\" is not "
                            "an integer >= 0");
    else if (parts == 0 || parts > INT32_MAX)
        rc = mcdc_error_set(err, MCDC_E_CORRUPT, "\"parts\" is %lld, not 1 to %d",
                            (long long)parts, INT32_MAX);
    else if (size >= 0 && adds > size)
        rc = mcdc_error_set(err, MCDC_E_CORRUPT,
                            "\"numOfAddFiles\" (%lld) exceeds the checkpoint's \"size\" (%lld)",
                            (long long)adds, (long long)size);
    if (rc == MCDC_OK) {
        out->version = version;
        out->size = size;
        out->size_bytes = size_bytes;
        out->parts = parts < 0 ? 0 : (int32_t)parts;
    }
    json_decref(j);
    return rc;
}

int mcdc_delta__last_checkpoint_read(delta_last_checkpoint *out, mcdc_storage *st,
                                     mcdc_error *err) {
    out->version = -1;
    mcdc_buf b = {0};
    int rc = mcdc_storage_get(st, MCDC_DELTA_LOG_DIR "/_last_checkpoint",
                              MCDC_DELTA_LAST_CHECKPOINT_BYTES_MAX, &b, err);
    if (rc == MCDC_E_LIMIT)
        rc = mcdc_error_set(err, MCDC_E_CORRUPT, "%s/_delta_log/_last_checkpoint is over %u bytes",
                            st->root, MCDC_DELTA_LAST_CHECKPOINT_BYTES_MAX);
    else if (rc == MCDC_OK && (rc = mcdc_delta__last_checkpoint_parse(out, b.data, b.len, err)))
        mcdc_error_wrap(err, "%s/_delta_log/_last_checkpoint", st->root);
    mcdc_buf_free(&b);
    return rc;
}

/* _last_checkpoint is only a hint (formats.md A8): never fail because of it.
 * A hint that differs from the checkpoints listed is what another writer
 * leaves while it checkpoints (it writes the checkpoint, then the hint; a
 * reader between its listing and its read of the hint sees a newer one, a
 * reader between the two writes an older one), or one stopped in between:
 * normal, said at debug level. Only a hint that is unparsable, or names a
 * version the log does not have, is damage worth a warning. */
static bool log_has_commit(mcdc_storage *st, const log_listing *ll, int64_t v) {
    for (size_t i = 0; i < ll->n_commits; i++)
        if (ll->commits[i] == v) return true;
    /* Written after the listing: a writer racing ahead. */
    char key[64];
    int64_t bytes;
    snprintf(key, sizeof key, MCDC_DELTA_LOG_DIR "/%020lld.json", (long long)v);
    return mcdc_storage_size(st, key, &bytes, NULL) == MCDC_OK;
}

/* hint_rc: what reading the hint gave (hint filled when MCDC_OK). Called
 * after a listing of the whole log. */
static void check_last_checkpoint(mcdc_storage *st, const log_listing *ll, int hint_rc,
                                  const delta_last_checkpoint *hint, const mcdc_error *hint_err) {
    int64_t newest = ll->cp.version;
    if (hint_rc == MCDC_E_CORRUPT) {
        mcdc_log(MCDC_LOG_WARN, "%s; ignored, the log is listed instead", hint_err->message);
    } else if (hint_rc != MCDC_OK) {
        return; /* none, or unreadable now: the listing decides */
    } else if (hint->version > newest && !log_has_commit(st, ll, hint->version)) {
        mcdc_log(MCDC_LOG_WARN,
                 "%s/_delta_log/_last_checkpoint points to version %lld, which the log does "
                 "not have (its newest checkpoint is version %lld): the hint is damaged; "
                 "ignored, the log is listed instead (the next checkpoint rewrites it)",
                 st->root, (long long)hint->version, (long long)newest);
    } else if (hint->version != newest) {
        mcdc_log(MCDC_LOG_DEBUG,
                 "%s/_delta_log/_last_checkpoint points to version %lld, the checkpoint "
                 "listed is version %lld (another writer checkpointing meanwhile, or its "
                 "checkpoint unreadable); read from the listing",
                 st->root, (long long)hint->version, (long long)newest);
    }
}

static int snapshot_finish(mcdc_delta_snapshot *s, const char *root, mcdc_error *err) {
    char where[600];
    snprintf(where, sizeof where, "table %s version %lld", root, (long long)s->version);
    if (s->metadata == NULL)
        return mcdc_error_set(err, MCDC_E_CORRUPT, "%s: the log has no metaData action", where);
    int rc = mcdc_delta__check_protocol(s->protocol, s->metadata, false, where, err);
    if (rc) return rc;
    rc = finalize(s, err);
    if (rc) return rc;
    return MCDC_OK;
}

/* Replays commits from..target onto s; all must exist (commits sorted). */
static int replay_commits(mcdc_delta_snapshot *s, mcdc_storage *st, const log_listing *ll,
                          int64_t from, int64_t target, mcdc_error *err) {
    size_t i = 0;
    while (i < ll->n_commits && ll->commits[i] < from) i++;
    for (int64_t v = from; v <= target; v++, i++) {
        if (i >= ll->n_commits || ll->commits[i] != v)
            return mcdc_error_set(err, MCDC_E_CORRUPT,
                                  "table %s: version %lld is missing (%s/_delta_log/%020lld.json "
                                  "does not exist but later versions do): the log has a gap",
                                  st->root, (long long)v, st->root, (long long)v);
        mcdc_delta_actions a;
        int rc = mcdc_delta__read_commit(&a, st, v, err);
        if (rc == MCDC_E_NOTFOUND)
            rc = mcdc_error_set(err, MCDC_E_CORRUPT,
                                "table %s: %s/_delta_log/%020lld.json vanished while reading",
                                st->root, st->root, (long long)v);
        if (rc) return rc;
        rc = mcdc_delta__snapshot_apply(s, &a, v, err);
        mcdc_delta_actions_clear(&a);
        if (rc) return mcdc_error_wrap(err, "table %s version %lld", st->root, (long long)v), rc;
    }
    return MCDC_OK;
}

static bool commits_from_zero(const log_listing *ll, int64_t target) {
    return ll->n_commits > (size_t)target && ll->commits[0] == 0 &&
           ll->commits[target] == target;
}

/* One reading of the log: listed whole (from 0) or, from > 0, listed from
 * version `from` (the checkpoint _last_checkpoint names). A listing from the
 * hint that does not bear it out (no complete checkpoint at `from` or later:
 * a lying or stale hint, a checkpoint deleted) or whose checkpoint is bad
 * sets *fallback and returns MCDC_OK with nothing loaded: the caller lists
 * the whole log instead, never trusting the hint. absent_ok: an empty log
 * is *out NULL and MCDC_OK (a listing's own NOTFOUND, a missing bucket,
 * stays an error). */
static int snapshot_load_listed(mcdc_delta_snapshot **out, mcdc_storage *st, int64_t version,
                                bool absent_ok, int64_t from_hint, bool *fallback, int hint_rc,
                                const delta_last_checkpoint *hint, const mcdc_error *hint_err,
                                mcdc_error *err) {
    *out = NULL;
    *fallback = false;
    log_listing ll;
    int rc = list_log(&ll, st, version, from_hint, err);
    if (rc) return rc;
    mcdc_delta_snapshot *s = NULL;
    int64_t latest = -1, target = -1;
    if (from_hint > 0 && ll.cp.version < from_hint) {
        mcdc_log(MCDC_LOG_DEBUG,
                 "%s/_delta_log/_last_checkpoint names version %lld, but the log lists no "
                 "complete checkpoint there or later; the whole log is listed instead",
                 st->root, (long long)from_hint);
        *fallback = true;
        goto done;
    }
    if (ll.n_commits == 0 && ll.cp.version < 0) {
        mcdc_free(ll.commits);
        if (absent_ok) return MCDC_OK;
        return mcdc_error_set(err, MCDC_E_NOTFOUND,
                              "no Delta table at %s (no commit in %s/_delta_log)", st->root,
                              st->root);
    }
    latest = ll.n_commits ? ll.commits[ll.n_commits - 1] : ll.cp.version;
    if (ll.cp.version > latest) latest = ll.cp.version;
    target = version < 0 ? latest : version;
    if (target > latest) {
        rc = mcdc_error_set(err, MCDC_E_NOTFOUND,
                            "table %s has no version %lld (latest is %lld)", st->root,
                            (long long)target, (long long)latest);
        goto done;
    }
    if (from_hint <= 0 && ll.cp.version >= 0) check_last_checkpoint(st, &ll, hint_rc, hint, hint_err);
    rc = mcdc_delta__snapshot_new(&s, err);
    if (rc) goto done;
    int64_t from = 0;
    if (ll.cp.version >= 0) {
        mcdc_delta_actions a;
        rc = mcdc_delta__read_checkpoint(&a, st, &ll.cp, err);
        if (rc == MCDC_OK) {
            rc = mcdc_delta__snapshot_apply(s, &a, ll.cp.version, err);
            mcdc_delta_actions_clear(&a);
            from = ll.cp.version + 1;
        }
        /* Only a checkpoint that is bad (not an out-of-memory or I/O error)
         * is worth replaying around. */
        bool bad = rc == MCDC_E_CORRUPT || rc == MCDC_E_UNSUPPORTED;
        if (bad && from_hint > 0) {
            /* The whole listing decides what replaces it. */
            mcdc_log(MCDC_LOG_DEBUG, "%s; the whole log is listed instead",
                     err ? err->message : "unreadable checkpoint");
            *fallback = true;
            rc = MCDC_OK;
            goto done;
        }
        if (bad && commits_from_zero(&ll, target)) {
            /* The JSON commits are all still there: the table does not need
             * the checkpoint, so a bad one costs time, not correctness. */
            mcdc_log(MCDC_LOG_WARN, "%s; replaying the JSON commits instead",
                     err ? err->message : "unreadable checkpoint");
            mcdc_delta_snapshot_free(s);
            s = NULL;
            rc = mcdc_delta__snapshot_new(&s, err);
            from = 0;
        }
        if (rc) goto done;
    } else if (ll.n_commits == 0 || ll.commits[0] != 0) {
        rc = mcdc_error_set(err, MCDC_E_CORRUPT,
                            "table %s: commit %s/_delta_log/%020lld.json (version 0) is "
                            "missing and no checkpoint replaces it",
                            st->root, st->root, 0LL);
        goto done;
    }
    rc = replay_commits(s, st, &ll, from, target, err);
    if (rc) goto done;
    rc = snapshot_finish(s, st->root, err);
done:
    mcdc_free(ll.commits);
    if (rc || *fallback) {
        mcdc_delta_snapshot_free(s);
        return rc;
    }
    MCDC_ASSERT(s->version == target);
    *out = s;
    return MCDC_OK;
}

/* The log is listed from the checkpoint _last_checkpoint names when there is
 * one (at or before the version asked for), so opening a long table costs
 * the listing of its tail, not of every commit since version 0. */
static int snapshot_load(mcdc_delta_snapshot **out, mcdc_delta_table *t, int64_t version,
                         bool absent_ok, mcdc_error *err) {
    mcdc_storage *st = t->storage;
    delta_last_checkpoint hint;
    mcdc_error hint_err = MCDC_ERROR_INIT;
    int hint_rc = mcdc_delta__last_checkpoint_read(&hint, st, &hint_err);
    /* An out-of-memory or I/O error reading the hint is the store's trouble,
     * and the listing would meet it too: said as it is. */
    if (hint_rc != MCDC_OK && hint_rc != MCDC_E_NOTFOUND && hint_rc != MCDC_E_CORRUPT) {
        if (err) *err = hint_err;
        return hint_rc;
    }
    int64_t from_hint = hint_rc == MCDC_OK && (version < 0 || hint.version <= version)
                            ? hint.version
                            : -1;
    bool fallback = false;
    int rc = snapshot_load_listed(out, st, version, absent_ok, from_hint, &fallback, hint_rc,
                                  &hint, &hint_err, err);
    if (rc == MCDC_OK && fallback)
        rc = snapshot_load_listed(out, st, version, absent_ok, -1, &fallback, hint_rc, &hint,
                                  &hint_err, err);
    MCDC_ASSERT(rc != MCDC_OK || !fallback);
    return rc;
}

int mcdc_delta_snapshot_load(mcdc_delta_snapshot **out, mcdc_delta_table *t, int64_t version,
                             mcdc_error *err) {
    return snapshot_load(out, t, version, false, err);
}

int mcdc_delta_snapshot_load_latest(mcdc_delta_snapshot **out, mcdc_delta_table *t,
                                    mcdc_error *err) {
    return snapshot_load(out, t, -1, true, err);
}

int mcdc_delta__snapshot_refresh(mcdc_delta_snapshot *s, mcdc_storage *st, mcdc_error *err) {
    bool changed = false;
    for (;;) {
        mcdc_delta_actions a;
        int rc = mcdc_delta__read_commit(&a, st, s->version + 1, err);
        if (rc == MCDC_E_NOTFOUND) break;
        if (rc) return rc;
        rc = mcdc_delta__snapshot_apply(s, &a, s->version + 1, err);
        mcdc_delta_actions_clear(&a);
        if (rc) return rc;
        changed = true;
    }
    return changed ? snapshot_finish(s, st->root, err) : MCDC_OK;
}

int mcdc_delta__snapshot_settle(mcdc_delta_snapshot *s, const char *root, mcdc_error *err) {
    return s->unsettled ? snapshot_finish(s, root, err) : MCDC_OK;
}

int mcdc_delta__snapshot_apply_own(mcdc_delta_snapshot *s, const char *data, size_t n,
                                   const char *root, mcdc_error *err) {
    int64_t v = s->version + 1;
    char label[600];
    snprintf(label, sizeof label, "%s/_delta_log/%020lld.json (version %lld, as written)", root,
             (long long)v, (long long)v);
    mcdc_delta_actions a;
    int rc = mcdc_delta_actions_parse(&a, data, n, label, err);
    if (rc) return rc;
    rc = mcdc_delta__snapshot_apply(s, &a, v, err);
    mcdc_delta_actions_clear(&a);
    if (rc == MCDC_OK) rc = snapshot_finish(s, root, err);
    MCDC_ASSERT(rc != MCDC_OK || s->version == v);
    return rc;
}

const json_t *mcdc_delta__snapshot_protocol_json(const mcdc_delta_snapshot *s) {
    return s->protocol;
}
const json_t *mcdc_delta__snapshot_metadata_json(const mcdc_delta_snapshot *s) {
    return s->metadata;
}

size_t mcdc_delta__snapshot_txn_count(const mcdc_delta_snapshot *s) { return s->n_txns; }

void mcdc_delta__snapshot_txn(const mcdc_delta_snapshot *s, size_t i, const char **app_id,
                              int64_t *version, int64_t *last_updated_ms) {
    MCDC_ASSERT(i < s->n_txns);
    *app_id = s->txns[i].app_id;
    *version = s->txns[i].version;
    *last_updated_ms = s->txns[i].last_updated_ms;
}

size_t mcdc_delta__snapshot_domain_count(const mcdc_delta_snapshot *s) { return s->n_domains; }

void mcdc_delta__snapshot_domain_at(const mcdc_delta_snapshot *s, size_t i, const char **domain,
                                    const char **configuration, bool *removed) {
    MCDC_ASSERT(i < s->n_domains);
    *domain = s->domains[i].domain;
    *configuration = s->domains[i].configuration;
    *removed = s->domains[i].removed;
}

/* ---- accessors ------------------------------------------------------------ */

int64_t mcdc_delta_snapshot_version(const mcdc_delta_snapshot *s) { return s->version; }

void mcdc_delta_snapshot_protocol(const mcdc_delta_snapshot *s, int32_t *min_reader,
                                  int32_t *min_writer) {
    *min_reader = (int32_t)json_integer_value(json_object_get(s->protocol, "minReaderVersion"));
    *min_writer = (int32_t)json_integer_value(json_object_get(s->protocol, "minWriterVersion"));
}

bool mcdc_delta_snapshot_has_feature(const mcdc_delta_snapshot *s, const char *name) {
    static const char *const lists[] = {"readerFeatures", "writerFeatures"};
    for (int k = 0; k < 2; k++) {
        size_t i;
        json_t *f;
        json_array_foreach(json_object_get(s->protocol, lists[k]), i, f) {
            if (json_is_string(f) && strcmp(json_string_value(f), name) == 0) return true;
        }
    }
    return false;
}

const char *mcdc_delta_snapshot_table_id(const mcdc_delta_snapshot *s) {
    return json_string_value(json_object_get(s->metadata, "id"));
}

const char *mcdc_delta_snapshot_schema_string(const mcdc_delta_snapshot *s) {
    return json_string_value(json_object_get(s->metadata, "schemaString"));
}

const char *mcdc_delta_snapshot_config(const mcdc_delta_snapshot *s, const char *key) {
    return config_get(s->metadata, key);
}

size_t mcdc_delta_snapshot_partition_column_count(const mcdc_delta_snapshot *s) {
    return json_array_size(json_object_get(s->metadata, "partitionColumns"));
}

int mcdc_delta_snapshot_schema(mcdc_schema **out, mcdc_delta_field_meta **out_meta,
                               const mcdc_delta_snapshot *s, mcdc_error *err) {
    return mcdc_delta_schema_from_json(out, out_meta, mcdc_delta_snapshot_schema_string(s), err);
}

bool mcdc_delta_snapshot_column_mapping(const mcdc_delta_snapshot *s) {
    const char *mode = config_get(s->metadata, "delta.columnMapping.mode");
    return mode != NULL && strcmp(mode, "name") == 0;
}

size_t mcdc_delta_snapshot_file_count(const mcdc_delta_snapshot *s) {
    MCDC_ASSERT(!s->unsettled);
    return s->n_live;
}

const mcdc_delta_file *mcdc_delta_snapshot_file(const mcdc_delta_snapshot *s, size_t i) {
    MCDC_ASSERT(!s->unsettled);
    MCDC_ASSERT(i < s->n_live);
    return &s->live_order[i]->f;
}

int64_t mcdc_delta_snapshot_total_bytes(const mcdc_delta_snapshot *s) {
    MCDC_ASSERT(!s->unsettled);
    int64_t sum = 0;
    for (size_t i = 0; i < s->n_live; i++) sum += s->live_order[i]->f.size_bytes;
    return sum;
}

int64_t mcdc_delta_stats_records(const char *stats_json) {
    if (stats_json == NULL) return -1;
    json_t *j = json_loads(stats_json, 0, NULL);
    /* A decimal(p>18, 0) bound is an integer beyond int64: parse as reals. */
    if (j == NULL) j = json_loads(stats_json, JSON_DECODE_INT_AS_REAL, NULL);
    json_t *n = j ? json_object_get(j, "numRecords") : NULL;
    int64_t v = -1;
    if (json_is_integer(n) && json_integer_value(n) >= 0)
        v = (int64_t)json_integer_value(n);
    else if (json_is_real(n) && json_real_value(n) >= 0 &&
             json_real_value(n) < 9007199254740992.0 &&
             json_real_value(n) == (double)(int64_t)json_real_value(n))
        v = (int64_t)json_real_value(n);
    json_decref(j);
    return v;
}

int64_t mcdc_delta_snapshot_total_records(const mcdc_delta_snapshot *s) {
    MCDC_ASSERT(!s->unsettled);
    int64_t sum = 0;
    for (size_t i = 0; i < s->n_live; i++) {
        int64_t n = mcdc_delta_stats_records(s->live_order[i]->f.stats_json);
        if (n < 0) return -1;
        /* numRecords counts the rows a deletion vector deletes too */
        sum += n - (s->live_order[i]->f.dv.storage_type ? s->live_order[i]->f.dv.cardinality : 0);
    }
    return sum;
}

size_t mcdc_delta_snapshot_tombstone_count(const mcdc_delta_snapshot *s) {
    MCDC_ASSERT(!s->unsettled);
    return s->n_tomb;
}

const mcdc_delta_file *mcdc_delta_snapshot_tombstone(const mcdc_delta_snapshot *s, size_t i) {
    MCDC_ASSERT(!s->unsettled);
    MCDC_ASSERT(i < s->n_tomb);
    return &s->files[s->tomb_order[i]].f;
}

int64_t mcdc_delta_snapshot_txn_version(const mcdc_delta_snapshot *s, const char *app_id) {
    for (size_t i = 0; i < s->n_txns; i++)
        if (strcmp(s->txns[i].app_id, app_id) == 0) return s->txns[i].version;
    return -1;
}

const char *mcdc_delta_snapshot_domain(const mcdc_delta_snapshot *s, const char *domain) {
    for (size_t i = 0; i < s->n_domains; i++)
        if (strcmp(s->domains[i].domain, domain) == 0)
            return s->domains[i].removed ? NULL : s->domains[i].configuration;
    return NULL;
}

int mcdc_delta_snapshot_verify_files(const mcdc_delta_snapshot *s, mcdc_delta_table *t,
                                     mcdc_error *err) {
    MCDC_ASSERT(!s->unsettled);
    for (size_t i = 0; i < s->n_live; i++) {
        const mcdc_delta_file *f = &s->live_order[i]->f;
        if (strchr(f->path, ':') != NULL || f->path[0] == '/')
            continue; /* absolute URI: outside this storage */
        int64_t size;
        int rc = mcdc_storage_size(t->storage, f->path, &size, err);
        if (rc == MCDC_E_NOTFOUND)
            return mcdc_error_set(err, MCDC_E_NOTFOUND,
                                  "table %s version %lld: data file %s is missing",
                                  t->storage->root, (long long)s->version, f->path);
        if (rc) return rc;
        if (size != f->size_bytes)
            return mcdc_error_set(err, MCDC_E_CORRUPT,
                                  "table %s version %lld: data file %s is %lld bytes, the log "
                                  "says %lld",
                                  t->storage->root, (long long)s->version, f->path,
                                  (long long)size, (long long)f->size_bytes);
    }
    return MCDC_OK;
}
