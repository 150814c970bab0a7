#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_options.h"
#include "mcdc_test.h"

TEST(options_names_ignore_case_and_validate) {
    mcdc_opts *o;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_opts_create(&o, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_opts_set(o, "maxcommitsperbatch", "3", NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_opts_get_int(o, "maxCommitsPerBatch"), 3);
    CHECK_EQ_INT(mcdc_opts_set(o, "maxCommitsPerBatch", "0", NULL, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "omit it for unlimited") != NULL);
    CHECK_EQ_INT(mcdc_opts_get_int(o, "maxCommitsPerBatch"), 3); /* old value kept */
    CHECK_EQ_INT(mcdc_opts_set(o, "failOnDataLoss", "Y", NULL, &e), MCDC_OK);
    CHECK(mcdc_opts_get_bool(o, "failOnDataLoss"));
    CHECK_EQ_INT(mcdc_opts_set(o, "failOnDataLoss", "nope", NULL, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "failOnDataLoss") != NULL);
    CHECK_EQ_INT(mcdc_opts_set(o, "numPartitions", "auto", NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_opts_get_int(o, "numPartitions"), -1);
    CHECK_EQ_INT(mcdc_opts_set(o, "startingLsn", "2a", NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_opts_set(o, "startingLsn", "0xZZ", NULL, &e), MCDC_E_INVALID);
    CHECK_EQ_STR(mcdc_opts_get(o, "arrowBatchSize"), "10000"); /* default */
    CHECK(mcdc_opts_get(o, "metricsPath") == NULL);
    mcdc_opts_free(o);
}

TEST(options_unknown_is_kept_and_reported) {
    mcdc_opts *o;
    mcdc_error e = MCDC_ERROR_INIT;
    bool unknown = false;
    mcdc_opts_create(&o, &e);
    const mcdc_log_sink *lvl = mcdc_log_use(&mcdc_test_quiet);
    CHECK_EQ_INT(mcdc_opts_set(o, "maxCommitPerBatch", "5", &unknown, &e), MCDC_OK);
    mcdc_log_use(lvl);
    CHECK(unknown);
    CHECK_EQ_STR(mcdc_opts_unknown(o), "maxCommitPerBatch");
    CHECK_EQ_INT(mcdc_opts_get_int(o, "maxCommitsPerBatch"), -1);
    mcdc_opts_free(o);
}

TEST(options_capture_instance_validation) {
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_validate_capture_instance("dbo_orders", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_validate_capture_instance("dbo_\xce\xb1\xce\xb2", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_validate_capture_instance("bad]name", &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "']'") != NULL);
    CHECK_EQ_INT(mcdc_validate_capture_instance("tab\there", &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_validate_capture_instance("", &e), MCDC_E_INVALID);
    char longname[120];
    memset(longname, 'a', 101);
    longname[101] = 0;
    CHECK_EQ_INT(mcdc_validate_capture_instance(longname, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "101") != NULL);
}

static void collect(void *ctx, const char *name, const char *value) {
    char *out = ctx;
    strcat(out, name);
    strcat(out, "=");
    strcat(out, value);
    strcat(out, ";");
}

TEST(options_file_and_redaction) {
    char path[] = "/tmp/mcdc_opts_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("# stream options\ncaptureInstance = dbo_orders\n\nconnectionString = Server=h;PWD=s3cret\n"
          "maxCommitsPerBatch = -4\n", f);
    fclose(f);
    mcdc_opts *o;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_opts_create(&o, &e);
    CHECK_EQ_INT(mcdc_opts_load_file(o, path, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, ":5: option maxCommitsPerBatch") != NULL);
    CHECK_EQ_INT(mcdc_opts_check_required(o, &e), MCDC_OK);
    char out[512] = {0};
    mcdc_opts_each(o, collect, out);
    CHECK(strstr(out, "s3cret") == NULL);
    CHECK(strstr(out, "connectionString=<redacted>") != NULL);
    mcdc_opts_free(o);
    mcdc_opts_create(&o, &e);
    CHECK_EQ_INT(mcdc_opts_check_required(o, &e), MCDC_E_INVALID);
    CHECK_EQ_STR(e.message, "missing required options: captureInstance, connectionString");
    mcdc_opts_free(o);
    remove(path);
}
