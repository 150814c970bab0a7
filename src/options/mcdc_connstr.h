/*
 * mcdc_connstr.h - ODBC / mssql-python connection strings as users write them.
 *
 *   Server=tcp:host,1433;Database=db;UID=u;PWD={p;w}}d};Encrypt=no;
 *   TrustServerCertificate=yes;Connection Timeout=30;App=my-job
 *
 * Grammar (ODBC): keyword=value pairs separated by ';'. Keywords are
 * case-insensitive, spaces inside them are ignored ("User ID" = "UserID"),
 * with the usual synonyms. A value starting with '{' runs to the matching
 * '}' ('}}' stands for one '}'), so it may hold ';'; other values run to the
 * next ';' and lose surrounding spaces. Empty pairs (";;") are skipped. A
 * keyword given twice: the last one wins. Unknown keywords are kept in
 * `unknown` and warned about once (their values never logged).
 *
 * Errors are MCDC_E_INVALID naming the keyword and the 0-based byte position.
 * The password never appears in a message: a bad PWD value is reported as
 * "PWD=<redacted>".
 */
#ifndef MCDC_CONNSTR_H
#define MCDC_CONNSTR_H

#include <stdbool.h>

#include "mcdc_util.h"

typedef enum mcdc_encrypt {
    MCDC_ENCRYPT_DEFAULT = 0, /* not given: opportunistic (FreeTDS "request") */
    MCDC_ENCRYPT_NO,          /* no, false, optional */
    MCDC_ENCRYPT_YES,         /* yes, true, mandatory */
    MCDC_ENCRYPT_STRICT       /* strict (TDS 8.0; FreeTDS 1.3 has TLS-required 7.4) */
} mcdc_encrypt;

typedef struct mcdc_connstr_pair {
    char *key;   /* owned, as written (trimmed) */
    char *value; /* owned, unescaped */
} mcdc_connstr_pair;

/* A parsed connection string. Every string is owned by it (NULL = not
 * given); mcdc_connstr_free releases all. Read-only after parsing. */
typedef struct mcdc_connstr {
    char *host;       /* Server/Address/Addr/Data Source/Network Address, tcp: stripped */
    int port;         /* 0 = not given */
    char *instance;   /* from host\instance, or NULL */
    char *database;   /* Database/Initial Catalog */
    char *user;       /* UID/User ID/User */
    char *password;   /* PWD/Password: never log it */
    mcdc_encrypt encrypt;
    int trust_server_certificate; /* -1 not given, 0 no, 1 yes */
    char *host_name_in_certificate; /* HostNameInCertificate: the name the server's
                                     * certificate must carry (default: host) */
    char *server_certificate; /* ServerCertificate: PEM file of the server's certificate
                               * (or its CA), trusted instead of the system store */
    int connect_timeout_s;        /* -1 not given */
    char *app;        /* App/Application Name */
    char *driver;     /* Driver (ignored by the FreeTDS backend) */
    int n_unknown;
    mcdc_connstr_pair *unknown; /* owned, n_unknown entries */
} mcdc_connstr;

/* Parses s (NUL-terminated, at most MCDC_CONNSTR_BYTES_MAX bytes). On success
 * *out is a new connstr (free with mcdc_connstr_free). A missing Server is an
 * error; everything else is optional. */
int mcdc_connstr_parse(mcdc_connstr **out, const char *s, mcdc_error *err);
void mcdc_connstr_free(mcdc_connstr *c);

/* The connection string rendered for logs, password as PWD={***} (and the
 * values of unknown keywords that look secret). Caller frees with
 * mcdc_free; NULL on allocation failure. */
char *mcdc_connstr_redacted(const mcdc_connstr *c);

/* FreeTDS "encryption" setting for c->encrypt: "request" (default, no,
 * optional), "require" (yes, mandatory, strict). Static string. */
const char *mcdc_connstr_freetds_encryption(const mcdc_connstr *c);

#endif /* MCDC_CONNSTR_H */
