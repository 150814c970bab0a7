/*
 * mcdc_aws_creds.h - the credentials an S3 storage signs with, found the
 * way AWS's own tools find them, from the storage options only (the library
 * reads no environment: the host passes the variables as options), in
 * this order:
 *
 *   1. AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN);
 *   2. web identity: AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN
 *      (+ AWS_ROLE_SESSION_NAME), exchanged by STS AssumeRoleWithWebIdentity
 *      (AWS_ENDPOINT_URL_STS, else the region's STS endpoint);
 *   3. the profile AWS_PROFILE (else "default") of the shared credentials
 *      file (AWS_SHARED_CREDENTIALS_FILE, else <HOME>/.aws/credentials)
 *      and of the config file (AWS_CONFIG_FILE, else <HOME>/.aws/config),
 *      which also gives the region; a profile named by AWS_PROFILE that
 *      neither file has is an error, the default one is only looked for; a
 *      profile that assumes a role, uses SSO or a credential process is
 *      refused as not supported;
 *   4. the container credentials endpoint (ECS, EKS Pod Identity):
 *      AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI, with
 *      AWS_CONTAINER_AUTHORIZATION_TOKEN or _TOKEN_FILE;
 *   5. EC2 instance metadata, IMDSv2 (AWS_EC2_METADATA_SERVICE_ENDPOINT,
 *      else 169.254.169.254), unless AWS_EC2_METADATA_DISABLED=true.
 *
 * Keys from 2, 4 and 5 expire: they are renewed when a request is signed
 * within 5 minutes of their expiry (a failed renewal keeps the old keys
 * while they last, with a warning).
 *
 * The secret and the session token stay inside the credentials: signing
 * happens here (under a lock, so a later refresh can swap them), and only
 * the access key id and where it came from are given out, for messages.
 */
#ifndef MCDC_AWS_CREDS_H
#define MCDC_AWS_CREDS_H

#include "mcdc_http.h"
#include "mcdc_storage.h"

typedef struct mcdc_aws_creds mcdc_aws_creds;

/* Finds credentials through env's options (see above). *region_out gets
 * the profile's region when one was read (owned; NULL otherwise). *out is
 * owned. MCDC_E_PERMISSION when none are found, MCDC_E_INVALID for a file
 * or profile that is not what it should be. */
int mcdc_aws_creds_create(mcdc_aws_creds **out, char **region_out, const mcdc_storage_env *env,
                          mcdc_error *err);
/* Gives back one hold of c (the last frees it). */
void mcdc_aws_creds_free(mcdc_aws_creds *c);
/* As mcdc_aws_creds_create, but through env's share (a runtime's, for the
 * stores opened with one set of its options) when it has one: the first
 * open finds the credentials (fetching them from STS or a metadata
 * endpoint), later ones take a hold of the same (their renewals too). */
int mcdc_aws_creds_shared(mcdc_aws_creds **out, char **region_out, const mcdc_storage_env *env,
                          mcdc_error *err);

/* Signs one attempt (see mcdc_sigv4_sign) with the current key. */
int mcdc_aws_creds_sign(mcdc_aws_creds *c, mcdc_http_headers *hdrs, mcdc_http_method method,
                        const char *url, const char *payload_hash, const char *region,
                        mcdc_error *err);
/* The access key id in use, copied into out (room bytes): for messages. */
void mcdc_aws_creds_key_id(mcdc_aws_creds *c, char *out, size_t room);
/* Where the key came from ("AWS_ACCESS_KEY_ID", "profile dev of
 * /home/u/.aws/credentials"); borrowed, for messages. */
const char *mcdc_aws_creds_source(const mcdc_aws_creds *c);

/* ---- the parsers (exposed for the unit tests and the fuzzers) ----------------------------- */

/* One profile's settings from a shared credentials or config file. */
typedef struct mcdc_aws_profile {
    char *key_id, *secret, *token, *region; /* owned, NULL when absent */
    const char *unsupported;                /* static: a setting we cannot follow, or NULL */
    bool found;                             /* the section was there */
} mcdc_aws_profile;

/* Takes the settings of section `section` (as written between the
 * brackets: "dev", "profile dev") of an INI text into p; settings already
 * set are kept (the credentials file is read before the config file). */
int mcdc_aws_profile_read(mcdc_aws_profile *p, const char *text, const char *section,
                          mcdc_error *err);
void mcdc_aws_profile_free(mcdc_aws_profile *p);

/* Keys that expire, as a credentials service gives them. */
typedef struct mcdc_aws_temp_keys {
    char *key_id, *secret, *token; /* owned */
    int64_t expires_ms;
} mcdc_aws_temp_keys;

/* The JSON of the container endpoint and of instance metadata
 * (AccessKeyId, SecretAccessKey, Token, Expiration) into f (zeroed by the
 * caller; free it either way). MCDC_E_PROTOCOL naming what, never quoting
 * the answer. */
int mcdc_aws_creds_json_parse(mcdc_aws_temp_keys *f, const char *body, size_t n,
                              const char *what, mcdc_error *err);
/* STS's AssumeRoleWithWebIdentity answer (XML: AccessKeyId,
 * SecretAccessKey, SessionToken, Expiration), the same way. */
int mcdc_aws_sts_parse(mcdc_aws_temp_keys *f, const char *body, size_t n, const char *what,
                       mcdc_error *err);
void mcdc_aws_temp_keys_free(mcdc_aws_temp_keys *f);

#endif /* MCDC_AWS_CREDS_H */
