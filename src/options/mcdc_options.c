/* mcdc_options.c - source options: names, defaults, validation. */
#include "mcdc_options.h"
#include "mssqlcdc_testing.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef enum {
    K_STRING,     /* any non-empty text */
    K_SECRET,     /* text never echoed */
    K_BOOL,       /* true/1/yes/y, false/0/no/n, any case */
    K_INT_POS,    /* integer >= 1 */
    K_INT_NONNEG, /* integer >= 0 */
    K_INT_AUTO,   /* "auto" or integer >= 1 */
    K_CI,         /* capture instance name */
    K_START,      /* earliest | latest | an LSN */
    K_ENUM        /* one of `choices` (any case) */
} kind;

typedef struct {
    const char *name;
    kind k;
    const char *def;     /* default, or NULL */
    const char *choices; /* K_ENUM: '|'-separated */
    int64_t max;         /* integers: the largest value that makes sense (0: none) */
} spec;

/* The reference's source options (reference §2.1.1), with our defaults;
 * indexed by mcdc_opt. Each spec starts its own line: tests/interop/
 * test_cli_docs.py finds the names there to check the help and README. */
static const spec SPECS[] = {
    [MCDC_OPT_CAPTURE_INSTANCE] =
        {"captureInstance", K_CI, NULL, NULL, 0},
    [MCDC_OPT_CONNECTION_STRING] =
        {"connectionString", K_SECRET, NULL, NULL, MCDC_CONNSTR_BYTES_MAX},
    /* auto: our own TDS client when Encrypt=no, else FreeTDS (TLS). The
     * reference's Python drivers are accepted and read with auto. */
    [MCDC_OPT_BACKEND] =
        {"backend", K_ENUM, "auto", "auto|native|freetds|mssql-python|arrow-odbc", 0},
    [MCDC_OPT_CONNECT_TIMEOUT] =
        {"connectTimeout", K_INT_NONNEG, "30", NULL, MCDC_TIMEOUT_S_MAX},
    /* Ours, not the reference's: seconds without a byte from the server
     * before a read counts as hung (a transient error, retried on a new
     * connection). 0 waits forever. */
    [MCDC_OPT_QUERY_TIMEOUT] =
        {"queryTimeout", K_INT_NONNEG, "300", NULL, MCDC_TIMEOUT_S_MAX},
    /* SQL Server's SET LOCK_TIMEOUT takes an int. */
    [MCDC_OPT_LOCK_TIMEOUT_MS] =
        {"lockTimeoutMs", K_INT_NONNEG, NULL, NULL, INT32_MAX},
    [MCDC_OPT_SOURCE_TIME_ZONE] =
        {"sourceTimeZone", K_STRING, "auto", NULL, 0},
    [MCDC_OPT_COLUMNS] =
        {"columns", K_STRING, NULL, NULL, 0},
    [MCDC_OPT_INCLUDE_COMMAND_ID] =
        {"includeCommandId", K_BOOL, "true", NULL, 0},
    [MCDC_OPT_STARTING_LSN] =
        {"startingLsn", K_START, "earliest", NULL, 0},
    [MCDC_OPT_MAX_COMMITS_PER_BATCH] =
        {"maxCommitsPerBatch", K_INT_POS, NULL, NULL, 0},
    [MCDC_OPT_NUM_PARTITIONS] =
        {"numPartitions", K_INT_AUTO, "auto", NULL, MCDC_PARTITIONS_MAX},
    [MCDC_OPT_ARROW_BATCH_SIZE] =
        {"arrowBatchSize", K_INT_POS, "10000", NULL, MCDC_ARROW_BATCH_ROWS_MAX},
    [MCDC_OPT_FAIL_ON_DATA_LOSS] =
        {"failOnDataLoss", K_BOOL, "true", NULL, 0},
    [MCDC_OPT_SCHEMA_CHANGE_POLICY] =
        {"schemaChangePolicy", K_ENUM, "classify", "classify|fail", 0},
    [MCDC_OPT_METRICS_PATH] =
        {"metricsPath", K_STRING, NULL, NULL, 0},
    [MCDC_OPT_SNAPSHOT_LSN] =
        {"snapshotLsn", K_START, NULL, NULL, 0},
    [MCDC_OPT_SNAPSHOT_CHUNKS] =
        {"snapshotChunks", K_STRING, NULL, NULL, 0},
    [MCDC_OPT_SNAPSHOT_KEYS] =
        {"snapshotKeys", K_STRING, NULL, NULL, 0},
    [MCDC_OPT_ISOLATION_LEVEL] =
        {"isolationLevel", K_ENUM, "readCommitted", "readCommitted|snapshot", 0},
    /* Ours: seconds a snapshot waits for capture to record a new capture
     * instance's start LSN (the lab saw 3 s under load, 5 min quiet). */
    [MCDC_OPT_CAPTURE_WAIT_SECONDS] =
        {"captureWaitSeconds", K_INT_NONNEG, "600", NULL, MCDC_TIMEOUT_S_MAX},
    /* Ours: the stream reads its next batch while the one before is
     * uploaded and committed; auto: on for object-store targets. */
    [MCDC_OPT_OVERLAP_BATCHES] =
        {"overlapBatches", K_ENUM, "auto", "auto|true|false", 0},
};
_Static_assert(sizeof SPECS / sizeof SPECS[0] == MCDC_OPT_COUNT, "one spec per mcdc_opt");
#define NSPECS (sizeof SPECS / sizeof SPECS[0])

/* Storage options: what the object-store backends read through the job's
 * storage env (mcdc_storage_env.option), under the names delta-rs and its
 * object_store give them as environment variables, so that a user's
 * existing settings carry over. Matched ignoring case (delta-rs takes
 * aws_region and AWS_REGION), kept in the upper case written here. */
typedef enum { S_TEXT, S_SECRET, S_BOOL } storage_kind;
/* One row per option: X(NAME, kind). The names' list below is a constant
 * of its own (mcdc_opts_storage_names), so that no call writes state. */
#define STORAGE_OPTIONS(X) \
    X(AWS_ACCESS_KEY_ID, S_TEXT) \
    X(AWS_SECRET_ACCESS_KEY, S_SECRET) \
    X(AWS_SESSION_TOKEN, S_SECRET) \
    X(AWS_REGION, S_TEXT) \
    X(AWS_DEFAULT_REGION, S_TEXT) \
    X(AWS_ENDPOINT_URL, S_TEXT) \
    X(AWS_ALLOW_HTTP, S_BOOL) \
    X(AWS_PROFILE, S_TEXT) \
    X(AWS_SHARED_CREDENTIALS_FILE, S_TEXT) \
    X(AWS_CONFIG_FILE, S_TEXT) \
    X(AWS_VIRTUAL_HOSTED_STYLE_REQUEST, S_BOOL) \
    X(AWS_S3_ADDRESSING_STYLE, S_TEXT) \
    X(AWS_WEB_IDENTITY_TOKEN_FILE, S_TEXT) \
    X(AWS_ROLE_ARN, S_TEXT) \
    X(AWS_ROLE_SESSION_NAME, S_TEXT) \
    X(AWS_EC2_METADATA_DISABLED, S_BOOL) \
    X(AWS_CONTAINER_CREDENTIALS_RELATIVE_URI, S_TEXT) \
    X(AWS_CONTAINER_CREDENTIALS_FULL_URI, S_TEXT) \
    X(AWS_CONTAINER_AUTHORIZATION_TOKEN, S_SECRET) \
    X(AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, S_TEXT) \
    X(AWS_EC2_METADATA_SERVICE_ENDPOINT, S_TEXT) \
    X(AWS_ENDPOINT_URL_S3, S_TEXT) \
    X(AWS_ENDPOINT_URL_STS, S_TEXT) \
    X(AWS_CA_BUNDLE, S_TEXT) \
    /* the HTTP layer reads these as options, never from the environment    \
     * itself; a proxy URL may carry a password, so they are kept secret */ \
    X(HTTPS_PROXY, S_SECRET) \
    X(HTTP_PROXY, S_SECRET) \
    X(NO_PROXY, S_TEXT) \
    X(AZURE_STORAGE_ACCOUNT_NAME, S_TEXT) \
    X(AZURE_STORAGE_ACCOUNT_KEY, S_SECRET) \
    X(AZURE_STORAGE_SAS_TOKEN, S_SECRET) \
    X(AZURE_STORAGE_CONNECTION_STRING, S_SECRET) \
    X(AZURE_STORAGE_TOKEN, S_SECRET) \
    X(AZURE_STORAGE_USE_EMULATOR, S_BOOL) \
    X(AZURE_STORAGE_ENDPOINT, S_TEXT) \
    X(AZURE_STORAGE_ALLOW_HTTP, S_BOOL) \
    /* object_store's spelling of the same */ \
    X(AZURE_ALLOW_HTTP, S_BOOL) \
    X(AZURE_CLIENT_ID, S_TEXT) \
    X(AZURE_CLIENT_SECRET, S_SECRET) \
    X(AZURE_TENANT_ID, S_TEXT) \
    X(AZURE_FEDERATED_TOKEN_FILE, S_TEXT) \
    X(AZURE_AUTHORITY_HOST, S_TEXT) \
    X(AZURE_MSI_ENDPOINT, S_TEXT) \
    X(AZURE_MSI_RESOURCE_ID, S_TEXT) \
    X(AZURE_OBJECT_ID, S_TEXT) \
    /* what Azure's hosts set for their managed identity (App Service,   \
     * Functions; MSI_ENDPOINT on older ones); the header is a secret */  \
    X(IDENTITY_ENDPOINT, S_TEXT) \
    X(IDENTITY_HEADER, S_SECRET) \
    X(MSI_ENDPOINT, S_TEXT) \
    X(MCDC_AZURE_MANAGED_IDENTITY, S_BOOL) \
    /* ours: sizes and time limits of the object stores (docs/object-stores.md) */ \
    X(MCDC_S3_PART_BYTES, S_TEXT) \
    X(MCDC_AZURE_BLOCK_BYTES, S_TEXT) \
    X(MCDC_HTTP_CONNECT_TIMEOUT_MS, S_TEXT) \
    X(MCDC_HTTP_TIMEOUT_MS, S_TEXT) \
    X(MCDC_HTTP_DEADLINE_MS, S_TEXT) \
    X(MCDC_LEASE_TTL_MS, S_TEXT) \
    /* where ~/.aws/credentials and ~/.aws/config are (the library reads    \
     * no environment, so the host passes it on) */                         \
    X(HOME, S_TEXT)
static const struct storage_spec {
    const char *name;
    storage_kind k;
} STORAGE[] = {
#define STORAGE_SPEC(n, k) {#n, k},
    STORAGE_OPTIONS(STORAGE_SPEC)
#undef STORAGE_SPEC
};
static const char *const STORAGE_NAMES[] = {
#define STORAGE_NAME(n, k) #n,
    STORAGE_OPTIONS(STORAGE_NAME)
#undef STORAGE_NAME
    NULL};
#define NSTORAGE (sizeof STORAGE / sizeof STORAGE[0])
/* An entry's id for a storage option: STORAGE_ID0 + its index in STORAGE. */
#define STORAGE_ID0 1000
_Static_assert(MCDC_OPT_COUNT < STORAGE_ID0, "storage ids after the source options");

typedef struct {
    char *name;
    char *value;
    int id; /* mcdc_opt, or -1 for an unknown name */
} entry;

struct mcdc_opts {
    entry *items;
    int n, cap;
    mcdc_buf unknown;
    /* test hooks (mssqlcdc_testing.h); not options: no name reaches them */
    char crash_at[MCDC_CRASH_AT_BYTES_MAX + 1];
    int64_t retry_backoff_ms;
};

static const spec *find_spec(const char *name) {
    for (size_t i = 0; i < NSPECS; i++)
        if (mcdc_str_ieq(SPECS[i].name, name)) return &SPECS[i];
    return NULL;
}

static int parse_bool(const char *v, bool *out);

/* The other spellings delta-rs users write in storage_options (object_store's
 * keys), each meaning the option named on its right. A bare name that means
 * one thing on S3 and another on Azure is in STORAGE_AMBIGUOUS instead. The
 * environment is never read for these: the CLI scans only the names above. */
static const struct storage_alias {
    const char *alias, *name;
} STORAGE_ALIASES[] = {
    {"ACCESS_KEY_ID", "AWS_ACCESS_KEY_ID"},
    {"SECRET_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY"},
    {"AWS_TOKEN", "AWS_SESSION_TOKEN"},
    {"SESSION_TOKEN", "AWS_SESSION_TOKEN"},
    {"REGION", "AWS_REGION"},
    {"DEFAULT_REGION", "AWS_DEFAULT_REGION"},
    {"AWS_ENDPOINT", "AWS_ENDPOINT_URL"},
    {"ENDPOINT_URL", "AWS_ENDPOINT_URL"},
    {"VIRTUAL_HOSTED_STYLE_REQUEST", "AWS_VIRTUAL_HOSTED_STYLE_REQUEST"},
    {"AWS_METADATA_ENDPOINT", "AWS_EC2_METADATA_SERVICE_ENDPOINT"},
    {"METADATA_ENDPOINT", "AWS_EC2_METADATA_SERVICE_ENDPOINT"},
    {"ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT_NAME"},
    {"AZURE_STORAGE_ACCESS_KEY", "AZURE_STORAGE_ACCOUNT_KEY"},
    {"AZURE_STORAGE_MASTER_KEY", "AZURE_STORAGE_ACCOUNT_KEY"},
    {"ACCOUNT_KEY", "AZURE_STORAGE_ACCOUNT_KEY"},
    {"ACCESS_KEY", "AZURE_STORAGE_ACCOUNT_KEY"},
    {"MASTER_KEY", "AZURE_STORAGE_ACCOUNT_KEY"},
    {"AZURE_STORAGE_SAS_KEY", "AZURE_STORAGE_SAS_TOKEN"},
    {"SAS_KEY", "AZURE_STORAGE_SAS_TOKEN"},
    {"SAS_TOKEN", "AZURE_STORAGE_SAS_TOKEN"},
    {"BEARER_TOKEN", "AZURE_STORAGE_TOKEN"},
    {"USE_EMULATOR", "AZURE_STORAGE_USE_EMULATOR"},
    {"AZURE_ENDPOINT", "AZURE_STORAGE_ENDPOINT"},
    {"AZURE_STORAGE_CLIENT_ID", "AZURE_CLIENT_ID"},
    {"CLIENT_ID", "AZURE_CLIENT_ID"},
    {"AZURE_STORAGE_CLIENT_SECRET", "AZURE_CLIENT_SECRET"},
    {"CLIENT_SECRET", "AZURE_CLIENT_SECRET"},
    {"AZURE_STORAGE_TENANT_ID", "AZURE_TENANT_ID"},
    {"AZURE_STORAGE_AUTHORITY_ID", "AZURE_TENANT_ID"},
    {"AZURE_AUTHORITY_ID", "AZURE_TENANT_ID"},
    {"TENANT_ID", "AZURE_TENANT_ID"},
    {"AUTHORITY_ID", "AZURE_TENANT_ID"},
    {"FEDERATED_TOKEN_FILE", "AZURE_FEDERATED_TOKEN_FILE"},
    {"OBJECT_ID", "AZURE_OBJECT_ID"},
    {"MSI_RESOURCE_ID", "AZURE_MSI_RESOURCE_ID"},
};
/* Bare names object_store reads for whichever store it builds; here one set
 * of options can serve both kinds of store, so they are refused by name. */
static const struct storage_alias STORAGE_AMBIGUOUS[] = {
    {"ENDPOINT", "AWS_ENDPOINT_URL or AZURE_STORAGE_ENDPOINT"},
    {"TOKEN", "AWS_SESSION_TOKEN or AZURE_STORAGE_TOKEN"},
    {"ALLOW_HTTP", "AWS_ALLOW_HTTP or AZURE_STORAGE_ALLOW_HTTP"},
};

static const struct storage_spec *find_storage(const char *name) {
    for (size_t i = 0; i < NSTORAGE; i++)
        if (mcdc_str_ieq(STORAGE[i].name, name)) return &STORAGE[i];
    for (size_t a = 0; a < sizeof STORAGE_ALIASES / sizeof STORAGE_ALIASES[0]; a++) {
        if (!mcdc_str_ieq(STORAGE_ALIASES[a].alias, name)) continue;
        for (size_t i = 0; i < NSTORAGE; i++)
            if (strcmp(STORAGE[i].name, STORAGE_ALIASES[a].name) == 0) return &STORAGE[i];
    }
    return NULL;
}

/* The options a bare name could mean, or NULL when it is not one of those. */
static const char *storage_ambiguous(const char *name) {
    for (size_t a = 0; a < sizeof STORAGE_AMBIGUOUS / sizeof STORAGE_AMBIGUOUS[0]; a++)
        if (mcdc_str_ieq(STORAGE_AMBIGUOUS[a].alias, name)) return STORAGE_AMBIGUOUS[a].name;
    return NULL;
}

static int ambiguous_storage(const char *name, const char *means, mcdc_error *err) {
    return mcdc_error_set(err, MCDC_E_INVALID,
                          "storage option '%s' is ambiguous: delta-rs reads it for S3 and for "
                          "Azure alike; write %s",
                          name, means);
}

/* A name that can only be meant as a storage option (AWS_..., AZURE_...). */
static bool storage_looking(const char *name) {
    return mcdc_str_nieq(name, "AWS_", 4) || mcdc_str_nieq(name, "AZURE_", 6);
}

/* The storage option names, space-separated, for messages. */
static void storage_names_text(char *out, size_t cap) {
    size_t at = 0;
    out[0] = 0;
    for (size_t i = 0; i < NSTORAGE && at < cap; i++) {
        int n = snprintf(out + at, cap - at, "%s%s", i ? " " : "", STORAGE[i].name);
        if (n < 0) break;
        at += (size_t)n;
    }
}

/* A storage option's value, checked (and a boolean written as true or
 * false, the form every backend reads); *norm points at value or a static
 * text. A secret's value is never echoed. */
static int validate_storage(const struct storage_spec *s, const char *value, const char **norm,
                            mcdc_error *err) {
    *norm = value;
    if (*value == 0)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "storage option %s is empty: give it a value, or leave it out",
                              s->name);
    if (strlen(value) > MCDC_STORAGE_OPTION_BYTES_MAX)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "storage option %s is %zu bytes long; at most %d are accepted",
                              s->name, strlen(value), MCDC_STORAGE_OPTION_BYTES_MAX);
    for (const unsigned char *p = (const unsigned char *)value; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "storage option %s holds a control character (byte 0x%02X at "
                                  "%zu): values are one line of text",
                                  s->name, *p, (size_t)(p - (const unsigned char *)value));
    if (s->k == S_BOOL) {
        bool b;
        if (parse_bool(value, &b))
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "storage option %s must be true or false (or 1/0, yes/no), "
                                  "not '%s'",
                                  s->name, value);
        *norm = b ? "true" : "false";
    }
    return MCDC_OK;
}

/* The refusal of an AWS_/AZURE_ name no backend reads: a typo there would
 * silently drop a credential or an endpoint. */
static int unknown_storage(const char *name, mcdc_error *err) {
    char names[MCDC_ERROR_MESSAGE_MAX];
    storage_names_text(names, sizeof names);
    return mcdc_error_set(err, MCDC_E_INVALID,
                          "unknown storage option '%s': the storage options (any case) are %s",
                          name, names);
}

int mcdc_opts_create(mcdc_opts **out, mcdc_error *err) {
    if (out == NULL) return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_opts_create: out is NULL");
    *out = mcdc_calloc(1, sizeof **out);
    if (*out == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    (*out)->unknown.limit = 64 * 1024;
    return MCDC_OK;
}

void mcdc_opts_free(mcdc_opts *o) {
    if (o == NULL) return;
    for (int i = 0; i < o->n; i++) {
        mcdc_free(o->items[i].name);
        mcdc_free(o->items[i].value);
    }
    mcdc_free(o->items);
    mcdc_buf_free(&o->unknown);
    mcdc_free(o);
}

static int parse_bool(const char *v, bool *out) {
    static const char *yes[] = {"true", "1", "yes", "y"}, *no[] = {"false", "0", "no", "n"};
    for (int i = 0; i < 4; i++) {
        if (mcdc_str_ieq(v, yes[i])) {
            *out = true;
            return MCDC_OK;
        }
        if (mcdc_str_ieq(v, no[i])) {
            *out = false;
            return MCDC_OK;
        }
    }
    return MCDC_E_INVALID;
}

int mcdc_validate_capture_instance(const char *name, mcdc_error *err) {
    if (name == NULL) return mcdc_error_set(err, MCDC_E_INVALID, "captureInstance is empty");
    size_t chars = 0;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "captureInstance contains a control character (byte 0x%02X at "
                                  "%zu): capture instance names are SQL Server sysnames",
                                  *p, (size_t)(p - (const unsigned char *)name));
        if (*p == ']')
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "captureInstance '%s' contains ']', which SQL Server does not "
                                  "allow in a capture instance name",
                                  name);
        if ((*p & 0xC0) != 0x80) chars++;
    }
    if (chars == 0)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "captureInstance is empty: give the name of the capture instance "
                              "to read (EXEC sys.sp_cdc_help_change_data_capture lists them)");
    if (chars > MCDC_CAPTURE_INSTANCE_CHARS_MAX)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "captureInstance is %zu characters long; SQL Server allows at "
                              "most %d",
                              chars, MCDC_CAPTURE_INSTANCE_CHARS_MAX);
    return MCDC_OK;
}

static bool is_lsn_text(const char *v) {
    const char *p = v;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) p += 2;
    size_t n = strlen(p);
    if (n == 0 || n > 20) return false;
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)p[i])) return false;
    return true;
}

static int validate(const spec *s, const char *v, mcdc_error *err) {
    int64_t n;
    bool b;
    switch (s->k) {
    case K_STRING:
        if (*v == 0) return mcdc_error_set(err, MCDC_E_INVALID, "option %s is empty", s->name);
        return MCDC_OK;
    case K_SECRET:
        if (*v == 0) return mcdc_error_set(err, MCDC_E_INVALID, "option %s is empty", s->name);
        if (s->max && strlen(v) > (size_t)s->max)
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "option %s is %zu bytes long; at most %lld are accepted",
                                  s->name, strlen(v), (long long)s->max);
        return MCDC_OK;
    case K_BOOL:
        if (parse_bool(v, &b))
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "option %s must be true/false (or 1/0, yes/no, y/n), not '%s'",
                                  s->name, v);
        return MCDC_OK;
    case K_INT_AUTO:
        if (mcdc_str_ieq(v, "auto")) return MCDC_OK;
        /* fall through */
    case K_INT_POS:
    case K_INT_NONNEG: {
        int64_t min = s->k == K_INT_NONNEG ? 0 : 1;
        if (mcdc_parse_i64(v, &n) || n < min)
            return mcdc_error_set(err, MCDC_E_INVALID, "option %s must be an integer >= %lld%s, not '%s'%s",
                                  s->name, (long long)min, s->k == K_INT_AUTO ? " or 'auto'" : "",
                                  v,
                                  strcmp(s->name, "maxCommitsPerBatch") == 0
                                      ? " (omit it for unlimited)"
                                      : "");
        if (s->max && n > s->max)
            return mcdc_error_set(err, MCDC_E_INVALID, "option %s must be at most %lld, not '%s'",
                                  s->name, (long long)s->max, v);
        return MCDC_OK;
    }
    case K_CI:
        return mcdc_validate_capture_instance(v, err);
    case K_START:
        if (mcdc_str_ieq(v, "earliest") || mcdc_str_ieq(v, "latest") || is_lsn_text(v))
            return MCDC_OK;
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "option %s must be 'earliest', 'latest' or an LSN such as "
                              "0x0000002A000001000001, not '%s'",
                              s->name, v);
    case K_ENUM: {
        const char *c = s->choices;
        while (*c) {
            const char *bar = strchr(c, '|');
            size_t len = bar ? (size_t)(bar - c) : strlen(c);
            if (strlen(v) == len && mcdc_str_nieq(v, c, len)) return MCDC_OK;
            c += len + (bar ? 1 : 0);
        }
        return mcdc_error_set(err, MCDC_E_INVALID, "option %s must be one of %s, not '%s'",
                              s->name, s->choices, v);
    }
    }
    MCDC_UNREACHABLE();
}

static entry *find_entry(const mcdc_opts *o, const char *name) {
    for (int i = 0; i < o->n; i++)
        if (mcdc_str_ieq(o->items[i].name, name)) return &o->items[i];
    return NULL;
}

int mcdc_opts_set(mcdc_opts *o, const char *name, const char *value, bool *unknown,
                  mcdc_error *err) {
    if (o == NULL || name == NULL || value == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_opts_set: %s is NULL",
                              o == NULL ? "the options handle" : name == NULL ? "name" : "value");
    const spec *s = find_spec(name);
    const struct storage_spec *ss = s ? NULL : find_storage(name);
    if (unknown) *unknown = s == NULL && ss == NULL;
    if (*name == 0) return mcdc_error_set(err, MCDC_E_INVALID, "an option name is empty: write -o name=value");
    int id = s ? (int)(s - SPECS) : ss ? STORAGE_ID0 + (int)(ss - STORAGE) : -1;
    if (s) {
        int rc = validate(s, value, err);
        if (rc) return rc;
        name = s->name;
    } else if (ss) {
        int rc = validate_storage(ss, value, &value, err);
        if (rc) return rc;
        name = ss->name;
    } else if (storage_looking(name)) {
        return unknown_storage(name, err);
    } else if (storage_ambiguous(name)) {
        return ambiguous_storage(name, storage_ambiguous(name), err);
    } else {
        mcdc_log(MCDC_LOG_WARN, "unknown option '%s' is ignored (known options: see "
                                "'mssql-cdc stream --help')", name);
        if (o->unknown.len) mcdc_buf_append_str(&o->unknown, ",", NULL);
        mcdc_buf_append_str(&o->unknown, name, NULL);
        mcdc_buf_cstr(&o->unknown, NULL);
    }
    char *v = mcdc_strdup(value);
    if (v == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    entry *e = find_entry(o, name);
    if (e) {
        mcdc_free(e->value);
        e->value = v;
        return MCDC_OK;
    }
    if (o->n == o->cap) {
        int cap = o->cap ? o->cap * 2 : 16;
        entry *items = mcdc_realloc(o->items, (size_t)cap * sizeof *items);
        if (items == NULL) {
            mcdc_free(v);
            return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        }
        o->items = items;
        o->cap = cap;
    }
    char *nm = mcdc_strdup(name);
    if (nm == NULL) {
        mcdc_free(v);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    o->items[o->n++] = (entry){nm, v, id};
    return MCDC_OK;
}

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
    return s;
}

/* Reads the whole options file: a regular file of at most
 * MCDC_OPTIONS_FILE_BYTES_MAX bytes (a directory, a device such as
 * /dev/zero or a FIFO would hang or mean nothing). *world_readable: others
 * than the owner may read it. */
static int read_options_file(const char *path, mcdc_buf *out, bool *others_read, mcdc_error *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "cannot open options file %s: %s: give the path of a text file of "
                              "'name = value' lines that this user may read",
                              path, strerror(errno));
    struct stat st;
    int rc = MCDC_OK;
    if (fstat(fd, &st) != 0)
        rc = mcdc_error_set(err, MCDC_E_INVALID, "cannot stat options file %s: %s", path,
                            strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "options file %s is %s, not a regular file: give the path of a "
                            "text file of 'name = value' lines",
                            path, S_ISDIR(st.st_mode) ? "a directory" : "a device, FIFO or socket");
    else if (st.st_size > MCDC_OPTIONS_FILE_BYTES_MAX)
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "options file %s is %lld bytes; an options file is at most %d",
                            path, (long long)st.st_size, MCDC_OPTIONS_FILE_BYTES_MAX);
    *others_read = rc == MCDC_OK && (st.st_mode & (S_IRGRP | S_IROTH)) != 0;
    out->limit = MCDC_OPTIONS_FILE_BYTES_MAX + 1;
    while (rc == MCDC_OK) {
        rc = mcdc_buf_reserve(out, 4096, err);
        if (rc) break;
        ssize_t n = read(fd, out->data + out->len, out->cap - out->len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            rc = mcdc_error_set(err, MCDC_E_INVALID, "cannot read options file %s: %s", path,
                                strerror(errno));
            break;
        }
        if (n == 0) break;
        out->len += (size_t)n;
        if (out->len > MCDC_OPTIONS_FILE_BYTES_MAX)
            rc = mcdc_error_set(err, MCDC_E_INVALID, "options file %s grew past %d bytes", path,
                                MCDC_OPTIONS_FILE_BYTES_MAX);
    }
    close(fd);
    return rc;
}

int mcdc_opts_load_file(mcdc_opts *o, const char *path, mcdc_error *err) {
    if (o == NULL || path == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_opts_load_file: %s is NULL",
                              o == NULL ? "the options handle" : "path");
    mcdc_buf b = {0};
    bool others_read = false;
    int rc = read_options_file(path, &b, &others_read, err);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&b, err);
    if (rc) {
        mcdc_buf_free(&b);
        return rc;
    }
    char *text = (char *)b.data;
    const char *nul = memchr(text, 0, b.len);
    if (nul) {
        int line = 1;
        for (const char *p = text; p < nul; p++) line += *p == '\n';
        mcdc_buf_free(&b);
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "%s:%d: a NUL byte (offset %zu): an options file is text; it was "
                              "not read further",
                              path, line, (size_t)(nul - text));
    }
    int lineno = 0;
    bool secret = false, in_storage = false;
    for (char *line = text, *next; rc == MCDC_OK && line && *line; line = next) {
        lineno++;
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        if (strlen(line) > MCDC_CONNSTR_BYTES_MAX + 256) {
            rc = mcdc_error_set(err, MCDC_E_INVALID, "%s:%d: line longer than %d bytes", path,
                                lineno, MCDC_CONNSTR_BYTES_MAX + 256);
            break;
        }
        char *t = trim(line);
        if (*t == 0 || *t == '#') continue;
        if (*t == '[') {
            /* [storage]: the lines after it are storage options; [source]:
             * source options again (the lines before any section may hold
             * either: their names tell them apart) */
            if (mcdc_str_ieq(t, "[storage]") || mcdc_str_ieq(t, "[source]")) {
                in_storage = mcdc_str_ieq(t, "[storage]");
                continue;
            }
            rc = mcdc_error_set(err, MCDC_E_INVALID,
                                "%s:%d: unknown section '%.64s': an options file has source "
                                "options, then optionally [storage] and its storage options",
                                path, lineno, t);
            break;
        }
        char *eq = strchr(t, '=');
        if (eq == NULL) {
            rc = mcdc_error_set(err, MCDC_E_INVALID,
                                "%s:%d: expected 'name = value', found no '='", path, lineno);
            break;
        }
        *eq = 0;
        const char *name = trim(t);
        const spec *sp = find_spec(name);
        secret |= (sp && sp->k == K_SECRET) || mcdc_opt_storage_secret(name);
        if (in_storage && find_storage(name) == NULL && storage_ambiguous(name)) {
            rc = ambiguous_storage(name, storage_ambiguous(name), err);
            mcdc_error_wrap(err, "%s:%d", path, lineno);
            break;
        }
        if (in_storage && find_storage(name) == NULL) {
            rc = sp ? mcdc_error_set(err, MCDC_E_INVALID,
                                     "%s:%d: %s is a source option, not a storage option: put "
                                     "it above the [storage] section (or after [source])",
                                     path, lineno, sp->name)
                    : unknown_storage(name, err);
            if (sp == NULL) mcdc_error_wrap(err, "%s:%d", path, lineno);
            break;
        }
        rc = mcdc_opts_set(o, name, trim(eq + 1), NULL, err);
        if (rc) mcdc_error_wrap(err, "%s:%d", path, lineno);
    }
    mcdc_buf_free(&b);
    if (rc == MCDC_OK && secret && others_read)
        mcdc_log(MCDC_LOG_WARN, "options file %s holds a connection string or a storage "
                                "secret and others than its owner may read it: chmod 600 %s",
                 path, path);
    return rc;
}

const char *mcdc_opts_get(const mcdc_opts *o, const char *name) {
    if (o == NULL || name == NULL) return NULL;
    entry *e = find_entry(o, name);
    if (e) return e->value;
    const spec *s = find_spec(name);
    return s ? s->def : NULL;
}

/* ---- typed accessors -------------------------------------------------------------- */
static const entry *entry_of(const mcdc_opts *o, mcdc_opt opt) {
    MCDC_ASSERT(o != NULL && opt >= 0 && opt < MCDC_OPT_COUNT);
    for (int i = 0; i < o->n; i++)
        if (o->items[i].id == (int)opt) return &o->items[i];
    return NULL;
}

/* The value given, else the default (NULL when none). */
static const char *value_of(const mcdc_opts *o, mcdc_opt opt) {
    const entry *e = entry_of(o, opt);
    return e ? e->value : SPECS[opt].def;
}

/* An integer option's value (validated by set), or `none` when it has no
 * value or is "auto". */
static int64_t int_of(const mcdc_opts *o, mcdc_opt opt, int64_t none) {
    MCDC_ASSERT(SPECS[opt].k == K_INT_POS || SPECS[opt].k == K_INT_NONNEG ||
                SPECS[opt].k == K_INT_AUTO);
    const char *v = value_of(o, opt);
    if (v == NULL || mcdc_str_ieq(v, "auto")) return none;
    int64_t n = 0;
    MCDC_ASSERT(mcdc_parse_i64(v, &n) == MCDC_OK);
    return n;
}

static bool bool_of(const mcdc_opts *o, mcdc_opt opt) {
    MCDC_ASSERT(SPECS[opt].k == K_BOOL);
    bool b = false;
    MCDC_ASSERT(parse_bool(value_of(o, opt), &b) == MCDC_OK);
    return b;
}

bool mcdc_opt_is_set(const mcdc_opts *o, mcdc_opt opt) { return entry_of(o, opt) != NULL; }

const char *mcdc_opt_name(mcdc_opt opt) {
    MCDC_ASSERT(opt >= 0 && opt < MCDC_OPT_COUNT);
    return SPECS[opt].name;
}

const char *mcdc_opt_capture_instance(const mcdc_opts *o) {
    return value_of(o, MCDC_OPT_CAPTURE_INSTANCE);
}

const char *mcdc_opt_connection_string(const mcdc_opts *o) {
    return value_of(o, MCDC_OPT_CONNECTION_STRING);
}

mcdc_backend_opt mcdc_opt_backend(const mcdc_opts *o, const char **given) {
    const char *v = value_of(o, MCDC_OPT_BACKEND);
    if (given) *given = v;
    if (mcdc_str_ieq(v, "auto")) return MCDC_BACKEND_AUTO;
    if (mcdc_str_ieq(v, "native")) return MCDC_BACKEND_NATIVE;
    if (mcdc_str_ieq(v, "freetds")) return MCDC_BACKEND_FREETDS;
    return MCDC_BACKEND_REFERENCE;
}

int mcdc_opt_connect_timeout_s(const mcdc_opts *o) {
    return (int)int_of(o, MCDC_OPT_CONNECT_TIMEOUT, 30);
}

int mcdc_opt_query_timeout_s(const mcdc_opts *o) {
    return (int)int_of(o, MCDC_OPT_QUERY_TIMEOUT, 300);
}

int mcdc_opt_capture_wait_s(const mcdc_opts *o) {
    return (int)int_of(o, MCDC_OPT_CAPTURE_WAIT_SECONDS, 600);
}

bool mcdc_opt_overlap_batches(const mcdc_opts *o, bool *is_auto) {
    const char *v = value_of(o, MCDC_OPT_OVERLAP_BATCHES);
    *is_auto = mcdc_str_ieq(v, "auto");
    return mcdc_str_ieq(v, "true");
}

int64_t mcdc_opt_lock_timeout_ms(const mcdc_opts *o) {
    return int_of(o, MCDC_OPT_LOCK_TIMEOUT_MS, -1);
}

const char *mcdc_opt_source_time_zone(const mcdc_opts *o) {
    const char *v = value_of(o, MCDC_OPT_SOURCE_TIME_ZONE);
    return mcdc_str_ieq(v, "auto") ? NULL : v;
}

const char *mcdc_opt_columns(const mcdc_opts *o) { return value_of(o, MCDC_OPT_COLUMNS); }

bool mcdc_opt_include_command_id(const mcdc_opts *o) {
    return bool_of(o, MCDC_OPT_INCLUDE_COMMAND_ID);
}

static mcdc_start_kind start_kind(const char *v) {
    if (mcdc_str_ieq(v, "earliest")) return MCDC_START_EARLIEST;
    if (mcdc_str_ieq(v, "latest")) return MCDC_START_LATEST;
    return MCDC_START_LSN;
}

mcdc_start_kind mcdc_opt_starting_lsn(const mcdc_opts *o, const char **text) {
    const char *v = value_of(o, MCDC_OPT_STARTING_LSN);
    if (text) *text = v;
    return start_kind(v);
}

int64_t mcdc_opt_max_commits_per_batch(const mcdc_opts *o) {
    return int_of(o, MCDC_OPT_MAX_COMMITS_PER_BATCH, 0);
}

int mcdc_opt_num_partitions(const mcdc_opts *o) {
    int64_t n = int_of(o, MCDC_OPT_NUM_PARTITIONS, 0);
    if (n <= 0) n = sysconf(_SC_NPROCESSORS_ONLN); /* auto */
    if (n < 1) n = 1;
    if (n > MCDC_PARTITIONS_MAX) n = MCDC_PARTITIONS_MAX;
    return (int)n;
}

int64_t mcdc_opt_arrow_batch_size(const mcdc_opts *o) {
    return int_of(o, MCDC_OPT_ARROW_BATCH_SIZE, 10000);
}

bool mcdc_opt_fail_on_data_loss(const mcdc_opts *o) {
    return bool_of(o, MCDC_OPT_FAIL_ON_DATA_LOSS);
}

bool mcdc_opt_schema_change_fail(const mcdc_opts *o) {
    return mcdc_str_ieq(value_of(o, MCDC_OPT_SCHEMA_CHANGE_POLICY), "fail");
}

const char *mcdc_opt_snapshot_lsn(const mcdc_opts *o) {
    const char *v = value_of(o, MCDC_OPT_SNAPSHOT_LSN);
    return v && start_kind(v) == MCDC_START_LSN ? v : NULL;
}

const char *mcdc_opt_snapshot_keys(const mcdc_opts *o) {
    return value_of(o, MCDC_OPT_SNAPSHOT_KEYS);
}

bool mcdc_opt_snapshot_isolation(const mcdc_opts *o) {
    return mcdc_str_ieq(value_of(o, MCDC_OPT_ISOLATION_LEVEL), "snapshot");
}

int mcdc_opts_check_required(const mcdc_opts *o, mcdc_error *err) {
    if (o == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "mcdc_opts_check_required: the options handle is NULL");
    bool ci = mcdc_opt_is_set(o, MCDC_OPT_CAPTURE_INSTANCE);
    bool cs = mcdc_opt_is_set(o, MCDC_OPT_CONNECTION_STRING);
    if (ci && cs) return MCDC_OK;
    return mcdc_error_set(err, MCDC_E_INVALID,
                          "missing required option%s: %s%s%s (give each as --<name> VALUE, "
                          "-o name=value, or a 'name = value' line of --options-file)",
                          (!ci && !cs) ? "s" : "", ci ? "" : "captureInstance",
                          (!ci && !cs) ? ", " : "", cs ? "" : "connectionString");
}

int mcdc_opts_clone(mcdc_opts **out, const mcdc_opts *o, mcdc_error *err) {
    int rc = mcdc_opts_create(out, err);
    if (rc) return rc;
    mcdc_opts *c = *out;
    c->items = o->n ? mcdc_calloc((size_t)o->n, sizeof *c->items) : NULL;
    if (o->n && c->items == NULL) rc = MCDC_E_NOMEM;
    else c->cap = o->n;
    /* Entries are copied as they are: they were validated (and unknown
     * names warned about) when they were set. */
    for (int i = 0; rc == MCDC_OK && i < o->n; i++) {
        c->items[i].name = mcdc_strdup(o->items[i].name);
        c->items[i].value = mcdc_strdup(o->items[i].value);
        c->items[i].id = o->items[i].id;
        c->n = i + 1;
        if (c->items[i].name == NULL || c->items[i].value == NULL) rc = MCDC_E_NOMEM;
    }
    memcpy(c->crash_at, o->crash_at, sizeof c->crash_at);
    c->retry_backoff_ms = o->retry_backoff_ms;
    if (rc == MCDC_OK && o->unknown.len)
        rc = mcdc_buf_append(&c->unknown, o->unknown.data, o->unknown.len, NULL) ||
                     mcdc_buf_cstr(&c->unknown, NULL)
                 ? MCDC_E_NOMEM
                 : MCDC_OK;
    if (rc) {
        mcdc_opts_free(c);
        *out = NULL;
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory copying the source options");
    }
    return MCDC_OK;
}

/* Whether the entry's value is a secret (never echoed). */
static bool entry_secret(const entry *e) {
    if (e->id >= STORAGE_ID0) return STORAGE[e->id - STORAGE_ID0].k == S_SECRET;
    return e->id >= 0 && SPECS[e->id].k == K_SECRET;
}

void mcdc_opts_each(const mcdc_opts *o, void (*fn)(void *, const char *, const char *),
                    void *ctx) {
    for (int i = 0; i < o->n; i++)
        fn(ctx, o->items[i].name, entry_secret(&o->items[i]) ? "<redacted>" : o->items[i].value);
}

const char *mcdc_opt_storage(const mcdc_opts *o, const char *name) {
    if (o == NULL || name == NULL) return NULL;
    for (int i = 0; i < o->n; i++)
        if (o->items[i].id >= STORAGE_ID0 && strcmp(o->items[i].name, name) == 0)
            return o->items[i].value;
    return NULL;
}

static const char *env_option(void *octx, const char *name) {
    return mcdc_opt_storage(octx, name);
}

mcdc_storage_env mcdc_opts_storage_env(const mcdc_opts *opts, const mcdc_storage_env *mem) {
    mcdc_storage_env env = {0};
    if (mem) {
        env.mem_store = mem->mem_store;
        env.ctx = mem->ctx;
    }
    if (opts) {
        env.option = env_option;
        env.octx = (void *)opts; /* read only: env_option takes it back as const */
    }
    return env;
}

bool mcdc_opts_has_storage(const mcdc_opts *o) {
    for (int i = 0; o && i < o->n; i++)
        if (o->items[i].id >= STORAGE_ID0) return true;
    return false;
}

bool mcdc_opt_is_storage(const char *name) { return name && find_storage(name) != NULL; }

bool mcdc_opt_storage_secret(const char *name) {
    const struct storage_spec *s = name ? find_storage(name) : NULL;
    return s && s->k == S_SECRET;
}

bool mcdc_opts_storage_secret(const char *name) { return mcdc_opt_storage_secret(name); }

const char *const *mcdc_opts_storage_names(void) { return STORAGE_NAMES; }

const char *mcdc_opts_storage_name(const char *name) {
    const struct storage_spec *s = name ? find_storage(name) : NULL;
    return s ? s->name : NULL;
}

const char *mcdc_opts_storage_ambiguous(const char *name) {
    return name ? storage_ambiguous(name) : NULL;
}

const char *mcdc_opts_unknown(const mcdc_opts *o) {
    return o->unknown.len ? (const char *)o->unknown.data : "";
}

/* The names, filled once (a table rewritten on every call raced between
 * threads); constant afterwards. */
static const char *g_known_names[NSPECS + 1];
static pthread_once_t g_known_names_once = PTHREAD_ONCE_INIT;

static void fill_known_names(void) {
    for (size_t i = 0; i < NSPECS; i++) g_known_names[i] = SPECS[i].name;
    g_known_names[NSPECS] = NULL;
}

const char *const *mcdc_opts_known_names(void) {
    pthread_once(&g_known_names_once, fill_known_names);
    return g_known_names;
}

/* ---- test hooks -------------------------------------------------------------------- */

int mcdc_opts_set_crash_at(mcdc_opts *o, const char *point, mcdc_error *err) {
    if (o == NULL) return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_opts_set_crash_at: o is NULL");
    if (point && strlen(point) > MCDC_CRASH_AT_BYTES_MAX)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "a crash point is at most %d bytes (\"<point>[:<unit>]\"), not %zu",
                              MCDC_CRASH_AT_BYTES_MAX, strlen(point));
    snprintf(o->crash_at, sizeof o->crash_at, "%s", point ? point : "");
    return MCDC_OK;
}

int mcdc_opts_set_retry_backoff_ms(mcdc_opts *o, int64_t ms, mcdc_error *err) {
    if (o == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_opts_set_retry_backoff_ms: o is NULL");
    if (ms < 0 || ms > MCDC_RETRY_BACKOFF_MS_MAX)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "the retry backoff is 1 to %d ms (0: the default), not %lld",
                              MCDC_RETRY_BACKOFF_MS_MAX, (long long)ms);
    o->retry_backoff_ms = ms;
    return MCDC_OK;
}

const char *mcdc_opt_crash_at(const mcdc_opts *o) {
    return o ? o->crash_at : "";
}

int64_t mcdc_opt_retry_backoff_ms(const mcdc_opts *o) {
    return o ? o->retry_backoff_ms : 0;
}
