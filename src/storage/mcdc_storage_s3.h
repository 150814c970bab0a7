/*
 * mcdc_storage_s3.h - the S3 backend's opener, for the scheme table
 * (mcdc_storage_uri.c). The backend itself: mcdc_storage_s3.c.
 */
#ifndef MCDC_STORAGE_S3_H
#define MCDC_STORAGE_S3_H

#include "mcdc_storage.h"

/* Opens s3://bucket[/prefix] (location; rest is what follows the scheme)
 * with the settings and credentials of env's options: AWS_REGION /
 * AWS_DEFAULT_REGION, AWS_ENDPOINT_URL(_S3), AWS_ALLOW_HTTP,
 * AWS_VIRTUAL_HOSTED_STYLE_REQUEST, AWS_S3_ADDRESSING_STYLE,
 * MCDC_S3_PART_BYTES and those of mcdc_aws_creds.h. Nothing is sent until
 * the first operation. */
int mcdc_storage_s3_open(mcdc_storage **out, const mcdc_storage_env *env, const char *location,
                         const char *rest, mcdc_error *err);

#endif /* MCDC_STORAGE_S3_H */
