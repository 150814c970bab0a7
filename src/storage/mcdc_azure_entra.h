/*
 * mcdc_azure_entra.h - Entra ID bearer tokens for the Azure Blob backend:
 * got from Entra ID's token endpoint (a client secret, or a federated token
 * file as a client assertion: workload identity) or from a managed
 * identity's endpoint (IMDS, or the host's IDENTITY_ENDPOINT), for the
 * resource https://storage.azure.com/, and renewed when a request is
 * authorized within MCDC_AZ_TOKEN_RENEW_AHEAD_MS of the token's expiry (a
 * failed renewal keeps the old token while it lasts, with a warning).
 *
 * The token, the client secret and the identity header stay in here: only
 * the Authorization header of a request carries the token, and messages
 * name the option a credential came from and the endpoint asked, never a
 * value of theirs.
 */
#ifndef MCDC_AZURE_ENTRA_H
#define MCDC_AZURE_ENTRA_H

#include <stdint.h>

#include "mcdc_azure_auth.h"
#include "mcdc_http.h"
#include "mcdc_storage.h"

typedef struct mcdc_az_entra mcdc_az_entra;

/* A token source for c's credential (one of the Entra ID kinds; c's strings
 * are copied), with its own small HTTP pool (cfg's proxy and CA settings
 * are used; its time limits are the source's own). The first token is
 * fetched now, so that a wrong credential fails before anything else is
 * done: MCDC_E_PERMISSION when the endpoint refuses (its error code and
 * description said), MCDC_E_PROTOCOL for an answer that holds no token.
 * *out is owned. */
int mcdc_az_entra_create(mcdc_az_entra **out, const mcdc_az_config *c,
                         const mcdc_http_config *cfg, mcdc_error *err);
/* Drops one reference (the last frees it). */
void mcdc_az_entra_free(mcdc_az_entra *t);
/* As mcdc_az_entra_create, through sh (a runtime's set of storage options:
 * mcdc_storage_env.share): the set's first store creates the source (its
 * first token fetched then) and sh keeps it; the next stores of the set
 * take a reference to it, so the jobs of one runtime fetch and renew one
 * token between them (renewals under its lock). A store whose credential
 * differs from the kept one's gets its own. sh NULL: its own. */
int mcdc_az_entra_shared(mcdc_az_entra **out, const mcdc_az_config *c,
                         const mcdc_http_config *cfg, mcdc_cred_share *sh, mcdc_error *err);

/* Sets "Authorization: Bearer <token>" on hdrs, renewing the token first
 * when it is near its expiry. Any thread. */
int mcdc_az_entra_authorize(mcdc_az_entra *t, mcdc_http_headers *hdrs, mcdc_error *err);

/* Tokens fetched so far (the first one included): for tests. */
int mcdc_az_entra_fetches(mcdc_az_entra *t);

/* ---- the answers (exposed for the unit tests and the fuzzer) --------------------------- */

/* A token answer (JSON: access_token, and expires_on as seconds since 1970
 * or else expires_in as seconds from now_ms, each a number or a string of
 * digits): *token (owned) and *expires_ms. MCDC_E_PROTOCOL naming what
 * (never quoting the body) when it is not one. */
int mcdc_az_token_parse(char **token, int64_t *expires_ms, const char *body, size_t n,
                        int64_t now_ms, const char *what, mcdc_error *err);
/* An error answer's "error" code and the first line of its
 * "error_description" (Entra ID), or its "error"/"message" (identity
 * endpoints), as "code: description" into out; "" when there is none. */
void mcdc_az_token_error(char *out, size_t cap, const char *body, size_t n);

#endif /* MCDC_AZURE_ENTRA_H */
