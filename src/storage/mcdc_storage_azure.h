/*
 * mcdc_storage_azure.h - the Azure Blob / ADLS Gen2 backend's opener, for
 * the scheme table (mcdc_storage_uri.c). The forms of a location and the
 * options it reads: mcdc_azure_auth.h; the protocol: mcdc_storage_azure.c
 * and docs/object-stores.md.
 */
#ifndef MCDC_STORAGE_AZURE_H
#define MCDC_STORAGE_AZURE_H

#include "mcdc_storage.h"

/* Opens the storage at an abfss://, abfs://, wasbs://, wasb:// or az://
 * location (rest: what follows "<scheme>://") with the env's options
 * (NULL: none, so only what the location says). Sends nothing: a wrong key or a missing container shows on the
 * first request. MCDC_E_INVALID: the location or an option is wrong (the
 * message says which); MCDC_E_PERMISSION: no credential was given. */
int mcdc_storage_azure_open(mcdc_storage **out, const mcdc_storage_env *env,
                            const char *location, const char *rest, mcdc_error *err);

#endif /* MCDC_STORAGE_AZURE_H */
