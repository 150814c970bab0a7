/*
 * mcdc_azure_auth.h - what the Azure Blob backend (mcdc_storage_azure.c)
 * knows before it sends a byte: the location's forms, the storage options
 * (delta-rs's names), connection strings, the emulator's well-known account,
 * Shared Key signing and SAS tokens, and the service's error bodies.
 *
 * Locations: abfss://<container>@<account>.dfs.core.windows.net/<prefix>
 * (abfs:// the same), wasbs://<container>@<account>.blob.core.windows.net/
 * <prefix> (wasb:// the same), az://<container>/<prefix> (the account from
 * AZURE_STORAGE_ACCOUNT_NAME or the connection string). Every form talks to
 * the Blob endpoint, over TLS whatever the scheme says, on flat and
 * hierarchical-namespace accounts alike: one Put Blob with If-None-Match is
 * a correct commit on both, so the DFS API is never used.
 *
 * Credentials, first found wins: an account key (option, then connection
 * string), a SAS token (the same), AZURE_STORAGE_TOKEN, a client secret
 * (AZURE_CLIENT_ID + AZURE_CLIENT_SECRET + AZURE_TENANT_ID), workload
 * identity (AZURE_FEDERATED_TOKEN_FILE + client id + tenant), a managed
 * identity when one is named (AZURE_MSI_ENDPOINT / IDENTITY_ENDPOINT /
 * MSI_ENDPOINT, AZURE_CLIENT_ID alone, AZURE_MSI_RESOURCE_ID,
 * AZURE_OBJECT_ID or MCDC_AZURE_MANAGED_IDENTITY=true), then the
 * emulator's key. Loading only checks and copies them; mcdc_azure_entra.h
 * gets the tokens.
 *
 * Nothing here reads the environment: options come from the storage env.
 * Secrets (the account key, a SAS signature, a client secret, a token)
 * never enter a message.
 */
#ifndef MCDC_AZURE_AUTH_H
#define MCDC_AZURE_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "mcdc_storage.h"

/* x-ms-version of every request: recent, and one Azurite 3.37 accepts. */
#define MCDC_AZ_API_VERSION "2025-01-05"
/* Azurite's account: public, documented with the emulator. */
#define MCDC_AZ_EMULATOR_ACCOUNT "devstoreaccount1"
#define MCDC_AZ_EMULATOR_ENDPOINT "http://127.0.0.1:10000"

/* The option names read (delta-rs / object_store's, upper case). */
#define MCDC_AZ_OPT_ACCOUNT "AZURE_STORAGE_ACCOUNT_NAME"
#define MCDC_AZ_OPT_KEY "AZURE_STORAGE_ACCOUNT_KEY"
#define MCDC_AZ_OPT_SAS "AZURE_STORAGE_SAS_TOKEN"
#define MCDC_AZ_OPT_CONNSTR "AZURE_STORAGE_CONNECTION_STRING"
#define MCDC_AZ_OPT_EMULATOR "AZURE_STORAGE_USE_EMULATOR"
#define MCDC_AZ_OPT_ENDPOINT "AZURE_STORAGE_ENDPOINT"
#define MCDC_AZ_OPT_ALLOW_HTTP "AZURE_ALLOW_HTTP"
/* Ours: the block size of large writes (bytes; tests make it small). */
#define MCDC_AZ_OPT_BLOCK_BYTES "MCDC_AZURE_BLOCK_BYTES"
/* Entra ID (delta-rs / object_store's names, and the variables Azure's own
 * hosts set: IDENTITY_ENDPOINT and IDENTITY_HEADER on App Service and
 * Functions, MSI_ENDPOINT on older ones). */
#define MCDC_AZ_OPT_TOKEN "AZURE_STORAGE_TOKEN"
#define MCDC_AZ_OPT_CLIENT_ID "AZURE_CLIENT_ID"
#define MCDC_AZ_OPT_CLIENT_SECRET "AZURE_CLIENT_SECRET"
#define MCDC_AZ_OPT_TENANT_ID "AZURE_TENANT_ID"
#define MCDC_AZ_OPT_AUTHORITY_HOST "AZURE_AUTHORITY_HOST"
#define MCDC_AZ_OPT_FEDERATED_TOKEN_FILE "AZURE_FEDERATED_TOKEN_FILE"
#define MCDC_AZ_OPT_MSI_ENDPOINT "AZURE_MSI_ENDPOINT"
#define MCDC_AZ_OPT_MSI_RESOURCE_ID "AZURE_MSI_RESOURCE_ID"
#define MCDC_AZ_OPT_OBJECT_ID "AZURE_OBJECT_ID"
/* Ours: "true" asks for the machine's own (system-assigned) managed
 * identity when nothing else names one. delta-rs falls back to it
 * silently; we ask first, so that a machine without one fails at once. */
#define MCDC_AZ_OPT_MANAGED_IDENTITY "MCDC_AZURE_MANAGED_IDENTITY"
/* Where Entra ID is, and what tokens are for. */
#define MCDC_AZ_AUTHORITY_DEFAULT "https://login.microsoftonline.com"
#define MCDC_AZ_IMDS_DEFAULT "http://169.254.169.254/metadata/identity/oauth2/token"
#define MCDC_AZ_TOKEN_RESOURCE "https://storage.azure.com/"
/* The identity endpoint's version (IMDS, App Service and Functions). */
#define MCDC_AZ_MSI_API_VERSION "2019-08-01"

typedef enum mcdc_az_cred {
    MCDC_AZ_CRED_SHARED_KEY = 1, /* Authorization: SharedKey account:signature */
    MCDC_AZ_CRED_SAS = 2,        /* the token's query on every URL, no signing */
    /* Entra ID: Authorization: Bearer <token> (mcdc_azure_entra.h) */
    MCDC_AZ_CRED_TOKEN = 3,         /* AZURE_STORAGE_TOKEN as given: never renewed */
    MCDC_AZ_CRED_CLIENT_SECRET = 4, /* a service principal's secret */
    MCDC_AZ_CRED_WORKLOAD = 5,      /* a federated token file (client assertion) */
    MCDC_AZ_CRED_MANAGED = 6        /* managed identity: IMDS or the host's endpoint */
} mcdc_az_cred;

/* What an Entra ID credential needs (the fields its kind uses; the rest
 * NULL). Secrets: token, client_secret, msi_header. */
typedef struct mcdc_az_entra_config {
    char *token;         /* owned (TOKEN) */
    char *client_id;     /* owned (CLIENT_SECRET, WORKLOAD; MANAGED: a user-assigned one) */
    char *client_secret; /* owned (CLIENT_SECRET) */
    char *token_url;     /* owned: <authority>/<tenant>/oauth2/v2.0/token */
    char *token_file;    /* owned (WORKLOAD): read anew at each renewal */
    char *msi_url;       /* owned (MANAGED): the endpoint, no query */
    char *msi_header;    /* owned (MANAGED): IDENTITY_HEADER's value, or NULL */
    char *msi_id_param;  /* owned (MANAGED): "msi_res_id=..." or "object_id=...", or NULL */
} mcdc_az_entra_config;

/* Where a storage lives and how it proves who it is. */
typedef struct mcdc_az_config {
    char *account;   /* owned */
    char *container; /* owned */
    char *prefix;    /* owned: "" or "a/b/" (keys are prefix + key) */
    /* owned: the blob endpoint, containers directly below it, no trailing
     * '/': "https://acct.blob.core.windows.net",
     * "http://127.0.0.1:10000/devstoreaccount1" */
    char *endpoint;
    const char *endpoint_path; /* into endpoint: "" or "/devstoreaccount1" */
    mcdc_az_cred cred;
    const char *cred_source; /* the option or connection-string field named in errors */
    uint8_t key[64];         /* the decoded account key (SHARED_KEY) */
    size_t key_len;
    char *sas; /* owned (SAS): the token's query, no leading '?' */
    mcdc_az_entra_config entra; /* the Entra ID kinds */
    size_t block_bytes; /* a writer's block: objects larger go as Put Block + list */
} mcdc_az_config;

/* Fills c from location (one of the forms above, the scheme included) and
 * the env's options. MCDC_E_INVALID names what is wrong and where it came
 * from (never a secret's value). c is zeroed first; free it either way. */
int mcdc_az_config_load(mcdc_az_config *c, const mcdc_storage_env *env, const char *location,
                        mcdc_error *err);
/* Frees c's strings and wipes the key. NULL-safe. */
void mcdc_az_config_free(mcdc_az_config *c);
/* "shared key", "SAS token", "client secret"... */
const char *mcdc_az_cred_name(mcdc_az_cred cred);

/* ---- Shared Key --------------------------------------------------------------------- */

typedef struct mcdc_az_header {
    const char *name; /* any case */
    const char *value;
} mcdc_az_header;

typedef struct mcdc_az_param {
    const char *name;  /* lower case */
    const char *value; /* decoded (as the URL will carry it percent-encoded) */
} mcdc_az_param;

/* The StringToSign of a Blob request (Shared Key, versions >= 2015-02-21):
 * the verb, the twelve standard headers taken from headers by name
 * (Content-Length empty when "0"), the x-ms-* headers lower-cased and
 * sorted, then "/<account><path>" and each parameter as "\nname:value",
 * sorted by name. path is the URL's path as sent (percent-encoded). */
int mcdc_az_string_to_sign(mcdc_buf *out, const char *method, const char *account,
                           const char *path, const mcdc_az_param *params, size_t nparams,
                           const mcdc_az_header *headers, size_t nheaders, mcdc_error *err);
/* Base64(HMAC-SHA256(key, sts)): 44 characters and a NUL. */
#define MCDC_AZ_SIGNATURE_CHARS 45
int mcdc_az_sign(char out[MCDC_AZ_SIGNATURE_CHARS], const uint8_t *key, size_t key_len,
                 const char *sts, size_t sts_len, mcdc_error *err);

/* ---- bytes and text ----------------------------------------------------------------- */

/* Standard base64 with padding of n bytes, appended to out (NUL-terminated,
 * the NUL not counted). */
int mcdc_az_base64_encode(mcdc_buf *out, const void *data, size_t n, mcdc_error *err);
/* Strict decoding (length a multiple of 4, padding only at the end) into
 * dst of room cap; *got bytes. -1 when s is not base64 or does not fit. */
int mcdc_az_base64_decode(uint8_t *dst, size_t cap, size_t *got, const char *s, size_t n);
/* A List Blobs <Blob> element's name (the text of its <Name>, entities
 * undone, percent-decoded where the element says Encoded="true", as the
 * service does for names XML cannot carry) into out (reset first,
 * NUL-terminated). *found is false when there is none. */
int mcdc_az_blob_name(const char *blob, const char *end, mcdc_buf *out, bool *found,
                      mcdc_error *err);
/* The service's error body (<Error><Code>..</Code><Message>..</Message>):
 * the code and the message's first line (its RequestId and the
 * authentication detail, which may quote a signature, are left out), XML
 * entities decoded. Empty strings when absent. */
void mcdc_az_error_parse(const char *body, size_t n, char *code, size_t code_cap, char *message,
                         size_t message_cap);
/* Replaces the value of every "sig=" in s (a URL or a message) with
 * "REDACTED", in place (s must have room: it never grows by more than 8
 * bytes per sig= and cap says the room). */
void mcdc_az_redact(char *s, size_t cap);
/* The permissions of a SAS token ("rwdl": its sp= value), copied into out;
 * "" when it has none. */
void mcdc_az_sas_permissions(const char *sas, char *out, size_t cap);

#endif /* MCDC_AZURE_AUTH_H */
