/*
 * cli_serve_config.c - serve's configuration file (cli_serve_config.h).
 *
 * inih reads the INI syntax; our reader function hands it the file a line
 * at a time and counts them, so that every key carries its line, and
 * refuses what inih would otherwise take silently: a line longer than its
 * buffer (it would be split in two) and a ';' after a space in a value (an
 * inline comment to inih: a connection string cut short). Then each
 * section is checked for its keys, the tables resolved against the
 * [service] templates and their [database], and each table's job prepared
 * as 'mssql-cdc stream' would.
 */
#include "cli_serve_config.h"
#include "cli_serve_schedule.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* A secret read from a file: a connection string is far shorter. */
#define SERVE_SECRET_BYTES_MAX 65536

typedef struct parse {
    serve_config *c;
    FILE *f;
    int line;             /* the line inih's handler is called for */
    int errors;
    int section_kind;     /* what the current section is */
    serve_kvs *cur;       /* where its keys go */
    bool indented;        /* the line read last starts with a space or tab */
    serve_kvs *last_in;   /* the key handled last: in which section's keys, */
    size_t last_at;       /* at which index */
} parse;

enum { SEC_NONE = 0, SEC_SERVICE, SEC_STORAGE, SEC_DATABASE, SEC_TABLE };

/* "mssql-cdc: serve: FILE:LINE: message" on stderr; counts the error. */
static void say(parse *p, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "mssql-cdc: serve: %s:%d: ", p->c->path, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    p->errors++;
}

static int kvs_add(serve_kvs *s, const char *key, const char *value, int line) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        serve_kv *kv = realloc(s->kv, cap * sizeof *kv);
        if (kv == NULL) return -1;
        s->kv = kv;
        s->cap = cap;
    }
    char *k = strdup(key), *v = strdup(value);
    if (k == NULL || v == NULL) {
        free(k);
        free(v);
        return -1;
    }
    s->kv[s->n++] = (serve_kv){k, v, line};
    return 0;
}

static void kvs_free(serve_kvs *s) {
    for (size_t i = 0; i < s->n; i++) {
        /* values may be secrets: not left in freed memory */
        volatile char *v = s->kv[i].value;
        for (size_t k = 0; v[k]; k++) v[k] = 0;
        free(s->kv[i].key);
        free(s->kv[i].value);
    }
    free(s->kv);
    memset(s, 0, sizeof *s);
}

static const serve_kv *kvs_get(const serve_kvs *s, const char *key) {
    for (size_t i = 0; i < s->n; i++)
        if (strcasecmp(s->kv[i].key, key) == 0) return &s->kv[i];
    return NULL;
}

/* ---- the reader inih calls ------------------------------------------------------------- */

static char *reader(char *str, int num, void *stream) {
    parse *p = stream;
    if (fgets(str, num, p->f) == NULL) return NULL;
    p->line++;
    p->indented = str[0] == ' ' || str[0] == '\t';
    size_t len = strlen(str);
    if (len == (size_t)num - 1 && str[len - 1] != '\n' && !feof(p->f)) {
        say(p, p->line, "the line is longer than %d characters: continue a long value on "
                        "lines starting with a space (joined by a space), or put a connection "
                        "string in a file (connectionString_file)",
            num - 2);
        /* the rest of the line is skipped, not parsed as a line of its own */
        int ch;
        while ((ch = fgetc(p->f)) != EOF && ch != '\n') {
        }
        str[0] = 0;
        return str;
    }
    const char *first = str + strspn(str, " \t");
    bool comment = *first == '#' || *first == ';';
    const char *eq = comment ? NULL : strchr(str, '=');
    for (const char *s = eq; s && *s; s++)
        if (*s == ';' && (s[-1] == ' ' || s[-1] == '\t')) {
            say(p, p->line, "a ';' after a space in a value (the INI syntax takes it as the "
                            "start of a comment and would cut the value there): remove the "
                            "space before it, or write comments on lines of their own");
            str[0] = 0;
            break;
        }
    return str;
}

/* ---- keys by section ------------------------------------------------------------------- */

/* The stream flags a [service] or [table] section may hold: the flag is
 * "--" and the key with '_' as '-'; booleans take true or false. */
static const char *const STREAM_KEYS[] = {
    "granularity", "trigger", "max_batches", "bootstrap", "snapshot", "snapshot_on_switch",
    "on_data_loss", "resnapshot_interval_days", "verbose", NULL};
static const char *const BOOL_KEYS[] = {"bootstrap", "snapshot_on_switch", "verbose", NULL};
static const char *const SERVICE_KEYS[] = {
    "max_connections", "encoder_threads", "metrics_listen", "metrics_poll_seconds",
    "lag_problem_seconds", "log_format", "quiet", "target", "app_id", "checkpoint",
    "facts_table", "control_table", "warehouse", NULL};
static const char *const TABLE_KEYS[] = {"target",    "app_id",          "checkpoint",
                                         "apply",     "apply_every",     "reconcile",
                                         "reconcile_every", "backfill", NULL};
const char *const SERVE_SCHEDULE_NAMES[SERVE_SCHEDULES] = {"apply", "reconcile", "backfill"};

static bool among(const char *key, const char *const *names) {
    for (size_t k = 0; names[k]; k++)
        if (strcasecmp(key, names[k]) == 0) return true;
    return false;
}

static bool storage_name(const char *key) {
    return mcdc_opts_storage_name(key) != NULL;
}

static bool source_name(const char *key) {
    return among(key, mcdc_opts_known_names());
}

static int handler(void *user, const char *section, const char *name, const char *value) {
    parse *p = user;
    serve_config *c = p->c;
    (void)c;
    if (name == NULL) return 1; /* a section's start (not called by default) */
    if (p->cur == NULL) {
        /* under a section refused above: said once there */
        if (section[0] == 0)
            say(p, p->line, "'%s = ...' before any section: it belongs in [service], [storage], "
                            "[database NAME] or [table DB.CAPTURE_INSTANCE]",
                name);
        return 1;
    }
    /* an indented line under a key continues its value (inih hands it over
     * as the same key again): the words joined by a space */
    if (p->indented && p->last_in == p->cur && p->last_at < p->cur->n &&
        strcasecmp(p->cur->kv[p->last_at].key, name) == 0) {
        serve_kv *kv = &p->cur->kv[p->last_at];
        size_t a = strlen(kv->value), b = strlen(value);
        char *v = realloc(kv->value, a + b + 2);
        if (v == NULL) {
            say(p, p->line, "out of memory");
            return 0;
        }
        v[a] = ' ';
        memcpy(v + a + 1, value, b + 1);
        kv->value = v;
        return 1;
    }
    if (kvs_get(p->cur, name)) {
        say(p, p->line, "'%s' is given twice in [%s] (line %d first): keep one", name, section,
            kvs_get(p->cur, name)->line);
        return 1;
    }
    bool ok = false;
    switch (p->section_kind) {
    case SEC_SERVICE: ok = among(name, SERVICE_KEYS) || among(name, STREAM_KEYS); break;
    case SEC_STORAGE: ok = storage_name(name); break;
    case SEC_DATABASE:
        ok = (source_name(name) || strcasecmp(name, "connectionString_env") == 0 ||
              strcasecmp(name, "connectionString_file") == 0) &&
             strcasecmp(name, "captureInstance") != 0;
        break;
    case SEC_TABLE:
        ok = among(name, TABLE_KEYS) || among(name, STREAM_KEYS) ||
             (source_name(name) && strcasecmp(name, "captureInstance") != 0 &&
              strcasecmp(name, "connectionString") != 0);
        break;
    default: break;
    }
    if (!ok) {
        const char *hint =
            p->section_kind == SEC_SERVICE   ? "the service's settings and stream flags"
            : p->section_kind == SEC_STORAGE ? "storage options (AWS_REGION, ...)"
            : p->section_kind == SEC_DATABASE
                ? "source options and connectionString[_env|_file]; captureInstance is the "
                  "table's"
                : "target, app_id, checkpoint, stream flags and source options (its "
                  "database's connection)";
        say(p, p->line, "'%s' is no key of [%s] (%s; see docs/service.md)", name, section, hint);
        return 1;
    }
    if (kvs_add(p->cur, name, value, p->line)) {
        say(p, p->line, "out of memory");
        return 0;
    }
    p->last_in = p->cur;
    p->last_at = p->cur->n - 1;
    return 1;
}

/* inih calls the handler with each key's section, not at a section's
 * start: the reader below sees the "[...]" lines and opens the section. */
static int open_section(parse *p, const char *line) {
    serve_config *c = p->c;
    const char *s = line;
    while (*s == ' ' || *s == '\t') s++;
    if (*s != '[') return 0;
    const char *end = strchr(s, ']');
    if (end == NULL) return 0; /* inih reports it */
    char sec[512];
    size_t len = (size_t)(end - s - 1);
    if (len >= sizeof sec) len = sizeof sec - 1;
    memcpy(sec, s + 1, len);
    sec[len] = 0;
    p->cur = NULL;
    p->section_kind = SEC_NONE;
    if (strcasecmp(sec, "service") == 0 || strcasecmp(sec, "storage") == 0) {
        serve_kvs *k = strcasecmp(sec, "service") == 0 ? &c->service : &c->storage;
        p->section_kind = k == &c->service ? SEC_SERVICE : SEC_STORAGE;
        p->cur = k;
        return 0;
    }
    char kind[16] = "", rest[512] = "";
    if (sscanf(sec, "%15s %511[^\n]", kind, rest) != 2) {
        say(p, p->line, "[%s] is no section: [service], [storage], [database NAME] or [table "
                        "DB.CAPTURE_INSTANCE]",
            sec);
        return 0;
    }
    char *e = rest + strlen(rest);
    while (e > rest && (e[-1] == ' ' || e[-1] == '\t')) *--e = 0;
    if (strcasecmp(kind, "database") == 0) {
        for (size_t i = 0; i < c->n_db; i++)
            if (strcasecmp(c->db[i].name, rest) == 0) {
                say(p, p->line, "[database %s] twice (line %d first): one section a database",
                    rest, c->db[i].line);
                return 0;
            }
        if (strchr(rest, '.') || strlen(rest) > CLI_MANY_NAME_MAX) {
            say(p, p->line, "database name '%s' holds a '.' or is longer than %d characters",
                rest, CLI_MANY_NAME_MAX);
            return 0;
        }
        serve_db *db = realloc(c->db, (c->n_db + 1) * sizeof *db);
        if (db == NULL) return -1;
        c->db = db;
        serve_db *d = &c->db[c->n_db];
        memset(d, 0, sizeof *d);
        if ((d->name = strdup(rest)) == NULL) return -1;
        d->line = p->line;
        c->n_db++;
        p->section_kind = SEC_DATABASE;
        p->cur = &d->kv;
        return 0;
    }
    if (strcasecmp(kind, "table") == 0) {
        const char *dot = strchr(rest, '.');
        if (dot == NULL || dot == rest || dot[1] == 0 ||
            strlen(dot + 1) > CLI_MANY_NAME_MAX) {
            say(p, p->line, "[table %s]: name it DATABASE.CAPTURE_INSTANCE (the database's "
                            "[database] section's name, a dot, the capture instance)",
                rest);
            return 0;
        }
        for (size_t i = 0; i < c->n_t; i++)
            if (strcasecmp(c->t[i]->name, rest) == 0) {
                say(p, p->line, "[table %s] twice (line %d first): one section a table", rest,
                    c->t[i]->line);
                return 0;
            }
        if (c->n_t >= CLI_MANY_TABLES_MAX) {
            say(p, p->line, "more than %d tables in one service", CLI_MANY_TABLES_MAX);
            return 0;
        }
        serve_table **tt = realloc(c->t, (c->n_t + 1) * sizeof *tt);
        if (tt == NULL) return -1;
        c->t = tt;
        serve_table *t = calloc(1, sizeof *t);
        if (t == NULL) return -1;
        c->t[c->n_t++] = t;
        t->name = strdup(rest);
        t->db = strndup(rest, (size_t)(dot - rest));
        t->ci = strdup(dot + 1);
        if (!t->name || !t->db || !t->ci) return -1;
        t->line = p->line;
        cli_table_init(&t->job, t->name, t->ci);
        p->section_kind = SEC_TABLE;
        p->cur = &t->kv;
        return 0;
    }
    say(p, p->line, "[%s] is no section: [service], [storage], [database NAME] or [table "
                    "DB.CAPTURE_INSTANCE]",
        sec);
    return 0;
}

static char *section_reader(char *str, int num, void *stream) {
    parse *p = stream;
    char *r = reader(str, num, stream);
    if (r && open_section(p, r) < 0) {
        say(p, p->line, "out of memory");
        return NULL;
    }
    return r;
}

/* ---- values --------------------------------------------------------------------------------- */

static int kv_int(parse *p, const serve_kv *kv, int64_t lo, int64_t hi, int64_t *out) {
    if (cli_parse_int(kv->key, kv->value, lo, hi, out) == EXIT_OK) return 0;
    say(p, kv->line, "'%s = %s': a whole number from %lld to %lld", kv->key, kv->value,
        (long long)lo, (long long)hi);
    return -1;
}

static int kv_seconds(parse *p, const serve_kv *kv, double lo, double hi, double *out) {
    if (cli_parse_number(kv->key, kv->value, lo, hi, out) == EXIT_OK) return 0;
    say(p, kv->line, "'%s = %s': a number of seconds from %g to %g", kv->key, kv->value, lo, hi);
    return -1;
}

static int kv_bool(parse *p, const serve_kv *kv, bool *out) {
    if (strcasecmp(kv->value, "true") == 0 || strcasecmp(kv->value, "yes") == 0) *out = true;
    else if (strcasecmp(kv->value, "false") == 0 || strcasecmp(kv->value, "no") == 0)
        *out = false;
    else {
        say(p, kv->line, "'%s = %s': true or false", kv->key, kv->value);
        return -1;
    }
    return 0;
}

static char *dup_or_null(const serve_kv *kv) {
    return kv ? strdup(kv->value) : NULL;
}

static void service(parse *p) {
    serve_config *c = p->c;
    const serve_kv *kv;
    c->metrics_poll_seconds = 15;
    c->lag_problem_seconds = 300;
    if ((kv = kvs_get(&c->service, "max_connections")))
        kv_int(p, kv, 2, 100000, &c->max_connections);
    if ((kv = kvs_get(&c->service, "encoder_threads")))
        kv_int(p, kv, 1, 4096, &c->encoder_threads);
    if ((kv = kvs_get(&c->service, "metrics_poll_seconds")))
        kv_seconds(p, kv, 0.1, 3600, &c->metrics_poll_seconds);
    if ((kv = kvs_get(&c->service, "lag_problem_seconds")))
        kv_seconds(p, kv, 0, 31536000, &c->lag_problem_seconds);
    if ((kv = kvs_get(&c->service, "quiet"))) kv_bool(p, kv, &c->quiet);
    if ((kv = kvs_get(&c->service, "log_format"))) {
        if (strcasecmp(kv->value, "json") == 0) c->log_json = true;
        else if (strcasecmp(kv->value, "text") != 0)
            say(p, kv->line, "'log_format = %s': text or json", kv->value);
    }
    if ((kv = kvs_get(&c->service, "metrics_listen"))) {
        if (cli_metrics_check_listen(kv->value) != EXIT_OK)
            say(p, kv->line, "'metrics_listen = %s' is refused (above)", kv->value);
        c->metrics_listen = strdup(kv->value);
    }
    c->target = dup_or_null(kvs_get(&c->service, "target"));
    c->app_id = dup_or_null(kvs_get(&c->service, "app_id"));
    c->checkpoint = dup_or_null(kvs_get(&c->service, "checkpoint"));
    c->facts_table = dup_or_null(kvs_get(&c->service, "facts_table"));
    c->control_table = dup_or_null(kvs_get(&c->service, "control_table"));
    c->warehouse = dup_or_null(kvs_get(&c->service, "warehouse"));
}

/* A secret from the environment or a file into the database's
 * connectionString (exactly one of the three forms). */
static void connection(parse *p, serve_db *d) {
    const serve_kv *inl = kvs_get(&d->kv, "connectionString");
    const serve_kv *env = kvs_get(&d->kv, "connectionString_env");
    const serve_kv *file = kvs_get(&d->kv, "connectionString_file");
    int forms = !!inl + !!env + !!file;
    if (forms != 1) {
        say(p, d->line, "[database %s] needs exactly one of connectionString, "
                        "connectionString_env (an environment variable's name) and "
                        "connectionString_file (a file readable by its owner only); it has %d",
            d->name, forms);
        return;
    }
    if (inl) {
        struct stat st;
        if (stat(p->c->path, &st) == 0 && (st.st_mode & 077))
            say(p, inl->line, "connectionString is written in a file others may read (mode "
                              "%03o): chmod 600 %s, or give it by connectionString_env or "
                              "connectionString_file",
                (unsigned)(st.st_mode & 0777), p->c->path);
        return;
    }
    char *secret = NULL;
    if (env) {
        const char *v = getenv(env->value);
        if (v == NULL || *v == 0) {
            say(p, env->line, "connectionString_env = %s: the environment has no such variable "
                              "(or it is empty): set it in the service's environment",
                env->value);
            return;
        }
        secret = strdup(v);
    } else {
        FILE *f = fopen(file->value, "r");
        struct stat st;
        if (f == NULL || fstat(fileno(f), &st) != 0) {
            say(p, file->line, "connectionString_file = %s cannot be read (%s)", file->value,
                strerror(errno));
            if (f) fclose(f);
            return;
        }
        if (st.st_mode & 077) {
            say(p, file->line, "connectionString_file = %s may be read by others (mode %03o): "
                               "chmod 600 it",
                file->value, (unsigned)(st.st_mode & 0777));
            fclose(f);
            return;
        }
        secret = calloc(1, SERVE_SECRET_BYTES_MAX + 1);
        size_t n = secret ? fread(secret, 1, SERVE_SECRET_BYTES_MAX + 1, f) : 0;
        fclose(f);
        if (n > SERVE_SECRET_BYTES_MAX) {
            say(p, file->line, "connectionString_file = %s is longer than %d bytes",
                file->value, SERVE_SECRET_BYTES_MAX);
            free(secret);
            return;
        }
        while (secret && n > 0 && (secret[n - 1] == '\n' || secret[n - 1] == '\r'))
            secret[--n] = 0;
    }
    if (secret == NULL || kvs_add(&d->kv, "connectionString", secret, (env ? env : file)->line))
        say(p, d->line, "out of memory");
    if (secret) {
        volatile char *v = secret;
        for (size_t k = 0; v[k]; k++) v[k] = 0;
    }
    free(secret);
}

/* ---- a table --------------------------------------------------------------------------------- */

static const serve_db *db_of(const serve_config *c, const serve_table *t) {
    for (size_t i = 0; i < c->n_db; i++)
        if (strcasecmp(c->db[i].name, t->db) == 0) return &c->db[i];
    return NULL;
}

/* The stream flags of kvs as words of a command line, appended to t's. */
static int add_flags(parse *p, serve_table *t, const serve_kvs *kvs) {
    for (size_t i = 0; i < kvs->n; i++) {
        const serve_kv *kv = &kvs->kv[i];
        if (!among(kv->key, STREAM_KEYS)) continue;
        bool on = true;
        if (among(kv->key, BOOL_KEYS) && kv_bool(p, kv, &on)) return -1;
        char flag[64] = "--";
        for (size_t k = 0; kv->key[k] && k + 3 < sizeof flag; k++)
            flag[k + 2] = kv->key[k] == '_' ? '-' : (char)tolower((unsigned char)kv->key[k]);
        char **argv = realloc(t->argv, (size_t)(t->argc + 2) * sizeof *argv);
        if (argv == NULL) return -1;
        t->argv = argv;
        if (among(kv->key, BOOL_KEYS)) {
            /* false: the flag's absence; a table's false undoes the service's true */
            if (!on) {
                for (int k = 0; k < t->argc; k++)
                    if (strcmp(t->argv[k], flag) == 0) t->argv[k][0] = 0;
                continue;
            }
            if ((t->argv[t->argc] = strdup(flag)) == NULL) return -1;
            t->argc++;
            continue;
        }
        if ((t->argv[t->argc] = strdup(flag)) == NULL) return -1;
        t->argc++;
        if ((t->argv[t->argc] = strdup(kv->value)) == NULL) return -1;
        t->argc++;
    }
    return 0;
}

/* The line of the key that set a stream flag (the table's, else the
 * service's). */
static int flag_line(const serve_config *c, const serve_table *t, const char *flag) {
    char key[64];
    size_t k = 0;
    for (const char *f = flag + 2; *f && k + 1 < sizeof key; f++) key[k++] = *f == '-' ? '_' : *f;
    key[k] = 0;
    const serve_kv *kv = kvs_get(&t->kv, key);
    if (kv == NULL) kv = kvs_get(&c->service, key);
    return kv ? kv->line : t->line;
}

/* A place template: the table's own, else the service's. */
static char *place(parse *p, serve_table *t, const char *key, const char *service_tpl) {
    const serve_kv *own = kvs_get(&t->kv, key);
    const char *tpl = own ? own->value : service_tpl;
    if (tpl == NULL) {
        say(p, t->line, "[table %s] has no %s: give [service] a %s template (holding {ci}, and "
                        "{db} with more than one database) or the table its own",
            t->name, key, key);
        return NULL;
    }
    if (!own && strstr(tpl, "{ci}") == NULL) {
        const serve_kv *kv = kvs_get(&p->c->service, key);
        say(p, kv ? kv->line : t->line, "the [service] %s template '%s' must contain {ci}: "
                                        "every table needs its own",
            key, tpl);
        return NULL;
    }
    char *v = cli_many_expand(tpl, t->ci, t->db);
    if (v == NULL) say(p, t->line, "out of memory");
    return v;
}

static int set_opt(parse *p, mcdc_opts *o, const serve_kv *kv, const char *secret_name) {
    mcdc_error e = MCDC_ERROR_INIT;
    bool unknown = false;
    if (mcdc_opts_set(o, kv->key, kv->value, &unknown, &e) == MCDC_OK && !unknown) return 0;
    /* the message names the option, never a secret's value */
    say(p, kv->line, "%s: %s", secret_name ? secret_name : kv->key,
        unknown ? "is no option" : e.message);
    return -1;
}

static void fingerprint_add(FILE *f, const char *a, const char *b) {
    fprintf(f, "%s\x1f%s\x1e", a, b ? b : "");
}

/* apply = FLAGS with apply_every = SECONDS, and the same for reconcile:
 * its placeholders filled ({ci}, {db}, the table's {target}, {app_id},
 * {checkpoint}, the service's {facts_table}, {control_table},
 * {warehouse}) and its words proved. */
static int schedules(parse *p, serve_table *t) {
    static const char *const NAMES[] = {"{ci}",         "{db}",           "{target}",
                                        "{app_id}",     "{checkpoint}",   "{facts_table}",
                                        "{control_table}", "{warehouse}"};
    const cli_table *j = &t->job;
    const char *values[] = {t->ci,          t->db,         j->target,
                            j->app_id,      j->checkpoint, t->facts_table,
                            t->control_table, t->warehouse};
    for (int k = 0; k < SERVE_SCHEDULE_BACKFILL; k++) {
        const char *what = SERVE_SCHEDULE_NAMES[k];
        char every_key[32];
        snprintf(every_key, sizeof every_key, "%s_every", what);
        const serve_kv *flags = kvs_get(&t->kv, what), *every = kvs_get(&t->kv, every_key);
        if (!flags && !every) continue;
        if (!flags || !every) {
            say(p, (flags ? flags : every)->line, "[table %s]: %s and %s go together: the "
                                                  "flags of 'mssql-cdc %s' and how many "
                                                  "seconds apart it runs",
                t->name, what, every_key, what);
            return -1;
        }
        if (kv_seconds(p, every, SERVE_SCHEDULE_SECONDS_MIN, 31536000, &t->every_s[k]))
            return -1;
        t->schedule[k] = cli_many_fill(flags->value, NAMES, values, sizeof NAMES / sizeof *NAMES);
        char **words = NULL;
        int n = 0;
        if (t->schedule[k] == NULL || cli_words_split(t->schedule[k], &words, &n) != 0) {
            say(p, flags->line, "[table %s]: %s = %s: no flags, or a quote not closed (words "
                                "split at spaces; '...' or \"...\" keep spaces)",
                t->name, what, flags->value);
            return -1;
        }
        bool any_placeholder_left = strchr(t->schedule[k], '{') && strchr(t->schedule[k], '}');
        cli_words_free(words);
        if (any_placeholder_left) {
            say(p, flags->line, "[table %s]: %s = %s: a {placeholder} that is not one of "
                                "{ci} {db} {target} {app_id} {checkpoint} {facts_table} "
                                "{control_table} {warehouse}, or one whose setting is not given",
                t->name, what, flags->value);
            return -1;
        }
    }
    return 0;
}

/* The flags backfill = EVERY FLAGS may give ('=': it takes a value); the
 * places and the source are the table's. */
static const char *const BACKFILL_FLAGS[] = {"--chunk-rows=",        "--max-waves=",
                                             "--max-seconds=",       "--target-wave-seconds=",
                                             "--min-headroom-hours=", "--isolation=",
                                             "--verbose",            NULL};

/* An options file's text for backfill's runs: the table's source options
 * (its database's, its own, its capture instance) and [storage]; NULL when
 * out of memory. */
static char *backfill_options(const serve_config *c, const serve_db *d, const serve_table *t) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL) return NULL;
    for (size_t i = 0; i < d->kv.n; i++)
        if (strncasecmp(d->kv.kv[i].key, "connectionString_", 17) != 0)
            fprintf(f, "%s = %s\n", d->kv.kv[i].key, d->kv.kv[i].value);
    for (size_t i = 0; i < t->kv.n; i++)
        if (source_name(t->kv.kv[i].key))
            fprintf(f, "%s = %s\n", t->kv.kv[i].key, t->kv.kv[i].value);
    fprintf(f, "captureInstance = %s\n[storage]\n", t->ci);
    for (size_t i = 0; i < c->storage.n; i++)
        fprintf(f, "%s = %s\n", c->storage.kv[i].key, c->storage.kv[i].value);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* backfill = EVERY FLAGS: 'mssql-cdc backfill' of the table's chunked
 * snapshot every EVERY seconds, with the table's target, app_id, the
 * service's facts_table and warehouse, its source and storage options (an
 * options file at fd 3), and FLAGS (BACKFILL_FLAGS only, their numbers
 * proved here). */
static int backfill_schedule(parse *p, serve_table *t, const serve_db *d) {
    const serve_kv *kv = kvs_get(&t->kv, "backfill");
    if (kv == NULL) return 0;
    char **w = NULL;
    int n = 0;
    if (cli_words_split(kv->value, &w, &n) != 0) {
        say(p, kv->line, "[table %s]: backfill = %s: give the seconds between runs, then "
                         "backfill's flags if any (a quote not closed?)",
            t->name, kv->value);
        return -1;
    }
    serve_kv every = {(char *)"backfill", w[0], kv->line};
    int bad = kv_seconds(p, &every, SERVE_SCHEDULE_SECONDS_MIN, 31536000,
                         &t->every_s[SERVE_SCHEDULE_BACKFILL]);
    if (!bad && t->facts_table == NULL) {
        say(p, kv->line, "[table %s]: backfill needs the stream's facts table: give [service] "
                         "facts_table",
            t->name);
        bad = 1;
    }
    for (int i = 1; i < n && !bad; i++) {
        const char *flag = NULL;
        for (size_t k = 0; BACKFILL_FLAGS[k] && !flag; k++) {
            size_t fl = strcspn(BACKFILL_FLAGS[k], "=");
            if (strlen(w[i]) == fl && strncmp(w[i], BACKFILL_FLAGS[k], fl) == 0)
                flag = BACKFILL_FLAGS[k];
        }
        if (flag == NULL) {
            say(p, kv->line, "[table %s]: backfill = %s: '%s' is not a flag backfill takes here "
                             "(serve gives it the table's target, app_id, source and storage "
                             "options and the service's facts_table and warehouse); after the "
                             "seconds: --chunk-rows N, --max-waves N, --max-seconds S, "
                             "--target-wave-seconds S, --min-headroom-hours H, --isolation L, "
                             "--verbose",
                t->name, kv->value, w[i]);
            bad = 1;
            break;
        }
        if (flag[strlen(flag) - 1] != '=') continue;
        if (i + 1 == n) {
            say(p, kv->line, "[table %s]: backfill = %s: %s needs a value", t->name, kv->value,
                w[i]);
            bad = 1;
            break;
        }
        const char *v = w[++i];
        int64_t count;
        double number;
        bool whole = strcmp(flag, "--chunk-rows=") == 0 || strcmp(flag, "--max-waves=") == 0;
        bool ok = strcmp(flag, "--isolation=") == 0
                      ? strcasecmp(v, "snapshot") == 0 || strcasecmp(v, "readCommitted") == 0
                  : whole ? cli_parse_int(w[i - 1], v, 1, CLI_COUNT_MAX, &count) == EXIT_OK
                          : cli_parse_number(w[i - 1], v, 0, 31536000, &number) == EXIT_OK;
        if (!ok) {
            say(p, kv->line, "[table %s]: backfill = %s: '%s %s': %s", t->name, kv->value,
                w[i - 1], v,
                strcmp(flag, "--isolation=") == 0 ? "snapshot or readCommitted"
                : whole                           ? "a whole number from 1"
                                                  : "a number from 0");
            bad = 1;
        }
    }
    if (bad) {
        cli_words_free(w);
        return -1;
    }
    /* backfill, its places, then the flags after the seconds */
    const cli_table *j = &t->job;
    const char *head[] = {"backfill",    "--options-file", "/dev/fd/3",  "--target",
                          j->target,     "--app-id",       j->app_id,    "--facts-table",
                          t->facts_table, "--progress",    "none",       "--warehouse",
                          t->warehouse};
    size_t nh = sizeof head / sizeof *head - (t->warehouse ? 0 : 2);
    t->backfill = calloc(nh + (size_t)n, sizeof *t->backfill);
    bool oom = t->backfill == NULL;
    for (size_t i = 0; i < nh && !oom; i++) oom = (t->backfill[i] = strdup(head[i])) == NULL;
    for (int i = 1; i < n && !oom; i++) {
        t->backfill[nh + (size_t)i - 1] = w[i];
        w[i] = NULL;
    }
    for (int i = 0; i < n; i++) free(w[i]); /* those not moved */
    free(w);
    if (!oom) oom = (t->backfill_options = backfill_options(p->c, d, t)) == NULL;
    if (oom) say(p, kv->line, "out of memory");
    return oom ? -1 : 0;
}

static void table_prepare(parse *p, serve_table *t, mcdc_budget *budget,
                          mcdc_runtime *runtime) {
    serve_config *c = p->c;
    const serve_db *d = db_of(c, t);
    if (d == NULL) {
        say(p, t->line, "[table %s]: there is no [database %s] section", t->name, t->db);
        return;
    }
    /* the database as its section names it (the metrics' label) */
    char *db = strdup(d->name);
    if (db == NULL) {
        say(p, t->line, "out of memory");
        return;
    }
    free(t->db);
    t->db = db;
    cli_table *j = &t->job;
    mcdc_error e = MCDC_ERROR_INIT;
    if (mcdc_opts_create(&j->opts, &e)) {
        say(p, t->line, "%s", e.message);
        return;
    }
    int bad = 0;
    /* the storage options, the database's, the table's own: later wins */
    for (size_t i = 0; i < c->storage.n; i++) bad |= set_opt(p, j->opts, &c->storage.kv[i], NULL);
    for (size_t i = 0; i < d->kv.n; i++) {
        const serve_kv *kv = &d->kv.kv[i];
        if (strncasecmp(kv->key, "connectionString_", 17) == 0) continue;
        bad |= set_opt(p, j->opts, kv,
                       strcasecmp(kv->key, "connectionString") == 0 ? "connectionString" : NULL);
    }
    for (size_t i = 0; i < t->kv.n; i++)
        if (source_name(t->kv.kv[i].key)) bad |= set_opt(p, j->opts, &t->kv.kv[i], NULL);
    if (bad) return;
    if (mcdc_opts_set(j->opts, "captureInstance", t->ci, NULL, &e) ||
        mcdc_opts_check_required(j->opts, &e)) {
        say(p, t->line, "[table %s]: %s", t->name, e.message);
        return;
    }
    if (cli_source_env(j->opts, 0, NULL) != EXIT_OK) {
        say(p, t->line, "[table %s]: the environment's options are refused (above)", t->name);
        return;
    }
    j->target = place(p, t, "target", c->target);
    j->app_id = place(p, t, "app_id", c->app_id);
    j->checkpoint = place(p, t, "checkpoint", c->checkpoint);
    if (!j->target || !j->app_id || !j->checkpoint) return;
    if (add_flags(p, t, &c->service) || add_flags(p, t, &t->kv)) return;
    mcdc_stream_cfg cfg = MCDC_STREAM_CFG_INIT;
    /* its own copies: a kept table outlives the config it was read with */
    if ((c->facts_table && !(t->facts_table = strdup(c->facts_table))) ||
        (c->control_table && !(t->control_table = strdup(c->control_table))) ||
        (c->warehouse && !(t->warehouse = strdup(c->warehouse)))) {
        say(p, t->line, "out of memory");
        return;
    }
    cfg.facts_table = t->facts_table;
    cfg.control_table = t->control_table;
    cfg.warehouse = t->warehouse;
    for (int i = 0; i < t->argc; i++) {
        if (t->argv[i][0] == 0) continue; /* a boolean a table turned off */
        int rc = EXIT_OK, at = i;
        if (!cli_stream_flag(&cfg, t->argc, t->argv, &i, &rc) || rc != EXIT_OK) {
            char key[64];
            size_t k = 0;
            for (const char *f = t->argv[at] + 2; *f && k + 1 < sizeof key; f++)
                key[k++] = *f == '-' ? '_' : *f;
            key[k] = 0;
            say(p, flag_line(c, t, t->argv[at]), "'%s' of [table %s] is refused (above)", key,
                t->name);
            return;
        }
    }
    cfg.budget = budget;
    cfg.runtime = runtime; /* one probe per database for the idle polls */
    j->cfg = cfg;
    j->json_log = c->log_json;
    cli_table_wire(j, c->quiet);
    if (mcdc_stream_create(&j->stream, j->opts, &j->cfg, &e)) {
        say(p, t->line, "[table %s]: %s: %s", t->name, mcdc_status_kind(e.code), e.message);
        return;
    }
    if (schedules(p, t) || backfill_schedule(p, t, d)) return;
    /* what it runs with, for a reload to compare */
    size_t len = 0;
    FILE *f = open_memstream(&t->fingerprint, &len);
    if (f == NULL) return;
    for (size_t i = 0; i < c->storage.n; i++)
        fingerprint_add(f, c->storage.kv[i].key, c->storage.kv[i].value);
    for (size_t i = 0; i < d->kv.n; i++) fingerprint_add(f, d->kv.kv[i].key, d->kv.kv[i].value);
    for (size_t i = 0; i < t->kv.n; i++) fingerprint_add(f, t->kv.kv[i].key, t->kv.kv[i].value);
    for (int i = 0; i < t->argc; i++) fingerprint_add(f, "argv", t->argv[i]);
    fingerprint_add(f, "target", j->target);
    fingerprint_add(f, "app_id", j->app_id);
    fingerprint_add(f, "checkpoint", j->checkpoint);
    fingerprint_add(f, "facts_table", c->facts_table);
    fingerprint_add(f, "control_table", c->control_table);
    fingerprint_add(f, "warehouse", c->warehouse);
    fingerprint_add(f, "log", c->log_json ? "json" : "text");
    fclose(f);
}

/* ---- the file --------------------------------------------------------------------------------- */

/* The budget: created from [service] when there is none yet, else the
 * tables must fit in it. */
static void budget_of(parse *p, mcdc_budget **budget, int64_t *connections) {
    serve_config *c = p->c;
    int64_t want = (int64_t)c->n_t + 1;
    if (*budget) {
        if (want > *connections)
            say(p, 0, "%zu tables need %lld connections and the service holds %lld: restart it "
                      "with a larger max_connections",
                c->n_t, (long long)want, (long long)*connections);
        return;
    }
    int64_t conns = c->max_connections;
    if (conns == 0) conns = (int64_t)c->n_t + SERVE_READ_CONNECTIONS + SERVE_RELOAD_ROOM;
    if (conns < want) {
        const serve_kv *kv = kvs_get(&c->service, "max_connections");
        say(p, kv ? kv->line : 0, "max_connections = %lld is too few for %zu tables: each holds "
                                  "one for its life, and one more reads",
            (long long)conns, c->n_t);
        return;
    }
    int64_t enc = c->encoder_threads;
    if (enc == 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        enc = cores > 0 ? cores : 1;
    }
    mcdc_error e = MCDC_ERROR_INIT;
    if (mcdc_budget_create(budget, (int)conns, (int)enc, &e)) {
        say(p, 0, "%s", e.message);
        return;
    }
    *connections = conns;
}

const char *serve_config_first_ci(const serve_config *c, size_t k) {
    for (size_t i = 0; i < c->n_t; i++)
        if (c->t[i] && strcasecmp(c->t[i]->db, c->db[k].name) == 0) return c->t[i]->ci;
    return NULL;
}

bool serve_config_probe_same(const serve_config *a, size_t ka, const serve_config *b, size_t kb) {
    const char *ca = serve_config_first_ci(a, ka), *cb = serve_config_first_ci(b, kb);
    const serve_kvs *x = &a->db[ka].kv, *y = &b->db[kb].kv;
    if (ca == NULL || cb == NULL || strcmp(ca, cb) != 0 || x->n != y->n) return false;
    for (size_t i = 0; i < x->n; i++) {
        bool found = false;
        for (size_t j = 0; j < y->n && !found; j++)
            found = strcasecmp(x->kv[i].key, y->kv[j].key) == 0 &&
                    strcmp(x->kv[i].value, y->kv[j].value) == 0;
        if (!found) return false;
    }
    return true;
}

mcdc_opts *serve_config_probe_opts(const serve_config *c, size_t k) {
    const char *first = serve_config_first_ci(c, k);
    mcdc_opts *o = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    if (first == NULL || mcdc_opts_create(&o, &e)) return NULL;
    int bad = 0;
    for (size_t i = 0; i < c->db[k].kv.n; i++) {
        const serve_kv *kv = &c->db[k].kv.kv[i];
        if (strncasecmp(kv->key, "connectionString_", 17) == 0) continue;
        bad |= mcdc_opts_set(o, kv->key, kv->value, NULL, &e);
    }
    bad |= mcdc_opts_set(o, "captureInstance", first, NULL, &e);
    bad |= cli_source_env(o, 0, NULL);
    if (bad) {
        mcdc_opts_free(o);
        return NULL;
    }
    return o;
}

int serve_config_load(serve_config **out, const char *path, mcdc_budget **budget,
                      int64_t *budget_connections, mcdc_runtime *runtime) {
    *out = NULL;
    serve_config *c = calloc(1, sizeof *c);
    if (c == NULL || (c->path = strdup(path)) == NULL) {
        free(c);
        return cli_usage_error("serve: %s", "out of memory");
    }
    parse p = {c, NULL, 0, 0, SEC_NONE, NULL, false, NULL, 0};
    p.f = fopen(path, "r");
    if (p.f == NULL) {
        fprintf(stderr, "mssql-cdc: serve: --config %s cannot be read: %s (give the path of "
                        "the service's INI file, see docs/service.md)\n",
                path, strerror(errno));
        serve_config_free(c);
        return EXIT_USAGE;
    }
    int at = ini_parse_stream(section_reader, &p, handler, &p);
    fclose(p.f);
    if (at > 0 && p.errors == 0)
        say(&p, at, "not INI syntax (a '[section]' line, 'key = value', or a comment "
                    "starting with '#' or ';')");
    else if (at < 0 && p.errors == 0)
        say(&p, 0, "out of memory");
    if (p.errors == 0) {
        service(&p);
        for (size_t i = 0; i < c->n_db; i++) connection(&p, &c->db[i]);
        if (c->n_t == 0)
            say(&p, p.line, "no [table DB.CAPTURE_INSTANCE] section: a service of no tables");
        for (size_t i = 0; i < c->n_db; i++) {
            size_t used = 0;
            for (size_t k = 0; k < c->n_t; k++)
                used += strcasecmp(c->t[k]->db, c->db[i].name) == 0;
            if (used == 0)
                say(&p, c->db[i].line, "[database %s] has no table: remove it, or add a [table "
                                       "%s.CAPTURE_INSTANCE]",
                    c->db[i].name, c->db[i].name);
        }
    }
    if (p.errors == 0) budget_of(&p, budget, budget_connections);
    for (size_t i = 0; p.errors == 0 && i < c->n_t; i++)
        table_prepare(&p, c->t[i], *budget, runtime);
    if (p.errors == 0) {
        cli_table **jobs = calloc(c->n_t ? c->n_t : 1, sizeof *jobs);
        mcdc_stream_cfg shared = MCDC_STREAM_CFG_INIT;
        shared.facts_table = c->facts_table;
        shared.control_table = c->control_table;
        for (size_t i = 0; jobs && i < c->n_t; i++) jobs[i] = &c->t[i]->job;
        if (jobs == NULL || cli_many_check_places("serve", jobs, c->n_t, &shared) != EXIT_OK)
            say(&p, 0, "two tables would write to one place (above): fix their target or "
                       "checkpoint");
        free(jobs);
    }
    if (p.errors) {
        fprintf(stderr, "mssql-cdc: serve: %s: %d error%s; nothing was started or changed "
                        "(see 'mssql-cdc serve --help' and docs/service.md)\n",
                path, p.errors, p.errors == 1 ? "" : "s");
        serve_config_free(c);
        return EXIT_USAGE;
    }
    *out = c;
    return EXIT_OK;
}

int serve_config_check_instances(const serve_config *c, const bool *fresh) {
    cli_table **jobs = calloc(c->n_t ? c->n_t : 1, sizeof *jobs);
    if (jobs == NULL) return cli_usage_error("serve: %s", "out of memory");
    int rc = EXIT_OK;
    for (size_t i = 0; rc == EXIT_OK && i < c->n_db; i++) {
        size_t n = 0;
        for (size_t k = 0; k < c->n_t; k++)
            if ((fresh == NULL || fresh[k]) && strcasecmp(c->t[k]->db, c->db[i].name) == 0)
                jobs[n++] = &c->t[k]->job;
        char where[600];
        snprintf(where, sizeof where, "%s:%d: [database %s]", c->path, c->db[i].line,
                 c->db[i].name);
        if (n) rc = cli_many_check_instances("serve", where, jobs[0]->opts, jobs, n);
    }
    free(jobs);
    return rc;
}

void serve_table_free(serve_table *t) {
    if (t == NULL) return;
    for (int k = 0; k < SERVE_SCHEDULES; k++) {
        serve_schedule_stop(t->running[k]);
        t->running[k] = NULL;
    }
    cli_table_release(&t->job);
    cli_words_free(t->backfill);
    if (t->backfill_options) explicit_bzero(t->backfill_options, strlen(t->backfill_options));
    free(t->backfill_options);
    kvs_free(&t->kv);
    for (int i = 0; i < t->argc; i++) free(t->argv[i]);
    free(t->argv);
    if (t->fingerprint) {
        volatile char *v = t->fingerprint;
        for (size_t k = 0; v[k]; k++) v[k] = 0;
    }
    free(t->fingerprint);
    for (int k = 0; k < SERVE_SCHEDULES; k++) free(t->schedule[k]);
    free(t->facts_table);
    free(t->control_table);
    free(t->warehouse);
    free(t->name);
    free(t->db);
    free(t->ci);
    free(t);
}

serve_table *serve_config_take(serve_config *c, size_t i) {
    serve_table *t = c->t[i];
    c->t[i] = NULL;
    return t;
}

long serve_config_find(const serve_config *c, const char *name) {
    for (size_t i = 0; i < c->n_t; i++)
        if (c->t[i] && strcasecmp(c->t[i]->name, name) == 0) return (long)i;
    return -1;
}

static bool same(const char *a, const char *b) {
    return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

const char *serve_config_fixed_differs(const serve_config *a, const serve_config *b) {
    if (a->max_connections != b->max_connections) return "max_connections";
    if (a->encoder_threads != b->encoder_threads) return "encoder_threads";
    if (!same(a->metrics_listen, b->metrics_listen)) return "metrics_listen";
    if (a->metrics_poll_seconds != b->metrics_poll_seconds) return "metrics_poll_seconds";
    if (a->lag_problem_seconds != b->lag_problem_seconds) return "lag_problem_seconds";
    if (!same(a->facts_table, b->facts_table)) return "facts_table";
    return NULL;
}

void serve_config_free(serve_config *c) {
    if (c == NULL) return;
    for (size_t i = 0; i < c->n_t; i++) serve_table_free(c->t[i]);
    free(c->t);
    for (size_t i = 0; i < c->n_db; i++) {
        free(c->db[i].name);
        kvs_free(&c->db[i].kv);
    }
    free(c->db);
    kvs_free(&c->service);
    kvs_free(&c->storage);
    free(c->metrics_listen);
    free(c->target);
    free(c->app_id);
    free(c->checkpoint);
    free(c->facts_table);
    free(c->control_table);
    free(c->warehouse);
    free(c->path);
    free(c);
}
