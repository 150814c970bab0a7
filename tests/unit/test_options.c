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
    CHECK_EQ_INT(mcdc_opt_max_commits_per_batch(o), 3);
    CHECK_EQ_INT(mcdc_opts_set(o, "maxCommitsPerBatch", "0", NULL, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "omit it for unlimited") != NULL);
    CHECK_EQ_INT(mcdc_opt_max_commits_per_batch(o), 3); /* old value kept */
    CHECK_EQ_INT(mcdc_opts_set(o, "failOnDataLoss", "N", NULL, &e), MCDC_OK);
    CHECK(!mcdc_opt_fail_on_data_loss(o));
    CHECK_EQ_INT(mcdc_opts_set(o, "failOnDataLoss", "Y", NULL, &e), MCDC_OK);
    CHECK(mcdc_opt_fail_on_data_loss(o));
    CHECK_EQ_INT(mcdc_opts_set(o, "failOnDataLoss", "nope", NULL, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "failOnDataLoss") != NULL);
    CHECK_EQ_INT(mcdc_opts_set(o, "numPartitions", "auto", NULL, &e), MCDC_OK);
    CHECK(mcdc_opt_num_partitions(o) >= 1); /* auto: the processors */
    CHECK_EQ_INT(mcdc_opts_set(o, "startingLsn", "2a", NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_opts_set(o, "startingLsn", "0xZZ", NULL, &e), MCDC_E_INVALID);
    CHECK_EQ_STR(mcdc_opts_get(o, "arrowBatchSize"), "10000"); /* default */
    CHECK(mcdc_opts_get(o, "metricsPath") == NULL);
    mcdc_opts_free(o);
}

/* Every typed accessor: its default, a value set, and its "unset" meaning. */
TEST(options_typed_accessors) {
    mcdc_opts *o;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_opts_create(&o, &e), MCDC_OK);
    /* defaults */
    CHECK(mcdc_opt_capture_instance(o) == NULL);
    CHECK(mcdc_opt_connection_string(o) == NULL);
    const char *given = NULL;
    CHECK_EQ_INT(mcdc_opt_backend(o, &given), MCDC_BACKEND_AUTO);
    CHECK_EQ_STR(given, "auto");
    CHECK_EQ_INT(mcdc_opt_connect_timeout_s(o), 30);
    CHECK_EQ_INT(mcdc_opt_query_timeout_s(o), 300);
    CHECK_EQ_INT(mcdc_opt_lock_timeout_ms(o), -1);
    CHECK_EQ_INT(mcdc_opt_capture_wait_s(o), 600);
    bool overlap_auto = false;
    CHECK(!mcdc_opt_overlap_batches(o, &overlap_auto));
    CHECK(overlap_auto);
    CHECK(mcdc_opt_source_time_zone(o) == NULL);
    CHECK(mcdc_opt_columns(o) == NULL);
    CHECK(mcdc_opt_include_command_id(o));
    const char *start = NULL;
    CHECK_EQ_INT(mcdc_opt_starting_lsn(o, &start), MCDC_START_EARLIEST);
    CHECK_EQ_STR(start, "earliest");
    CHECK_EQ_INT(mcdc_opt_max_commits_per_batch(o), 0);
    int cpus = mcdc_opt_num_partitions(o);
    CHECK(cpus >= 1 && cpus <= MCDC_PARTITIONS_MAX);
    CHECK_EQ_INT(mcdc_opt_arrow_batch_size(o), 10000);
    CHECK(mcdc_opt_fail_on_data_loss(o));
    CHECK(mcdc_opt_snapshot_lsn(o) == NULL);
    CHECK(mcdc_opt_snapshot_keys(o) == NULL);
    CHECK(!mcdc_opt_snapshot_isolation(o));
    for (int i = 0; i < MCDC_OPT_COUNT; i++) CHECK(!mcdc_opt_is_set(o, (mcdc_opt)i));
    /* each id names its option, and the known names are those, in order */
    static const char *const NAMES[MCDC_OPT_COUNT] = {
        "captureInstance", "connectionString", "backend", "connectTimeout", "queryTimeout",
        "lockTimeoutMs", "sourceTimeZone", "columns", "includeCommandId", "startingLsn",
        "maxCommitsPerBatch", "numPartitions", "arrowBatchSize", "failOnDataLoss",
        "schemaChangePolicy", "metricsPath", "snapshotLsn", "snapshotChunks", "snapshotKeys",
        "isolationLevel", "captureWaitSeconds", "overlapBatches"};
    const char *const *known = mcdc_opts_known_names();
    for (int i = 0; i < MCDC_OPT_COUNT; i++) {
        CHECK_EQ_STR(mcdc_opt_name((mcdc_opt)i), NAMES[i]);
        CHECK_EQ_STR(known[i], NAMES[i]);
    }
    CHECK(known[MCDC_OPT_COUNT] == NULL);
    /* values, any case of name and value */
    static const char *const SET[][2] = {
        {"CAPTUREINSTANCE", "dbo_orders"}, {"connectionstring", "Server=x;UID=u;PWD=p"},
        {"backend", "FreeTDS"},            {"connectTimeout", "0"},
        {"queryTimeout", "7"},             {"lockTimeoutMs", "250"},
        {"sourceTimeZone", "W. Europe Standard Time"}, {"columns", "id INT"},
        {"includeCommandId", "no"},        {"startingLsn", "0x2A"},
        {"maxCommitsPerBatch", "9"},       {"numPartitions", "3"},
        {"arrowBatchSize", "128"},         {"failOnDataLoss", "false"},
        {"snapshotLsn", "2b"},             {"snapshotKeys", "[\"id\"]"},
        {"isolationLevel", "SNAPSHOT"},   {"captureWaitSeconds", "0"},
        {"overlapBatches", "TRUE"}};
    for (size_t i = 0; i < sizeof SET / sizeof SET[0]; i++)
        CHECK_EQ_INT(mcdc_opts_set(o, SET[i][0], SET[i][1], NULL, &e), MCDC_OK);
    CHECK_EQ_STR(mcdc_opt_capture_instance(o), "dbo_orders");
    CHECK_EQ_STR(mcdc_opt_connection_string(o), "Server=x;UID=u;PWD=p");
    CHECK_EQ_INT(mcdc_opt_backend(o, &given), MCDC_BACKEND_FREETDS);
    CHECK_EQ_INT(mcdc_opt_connect_timeout_s(o), 0);
    CHECK_EQ_INT(mcdc_opt_query_timeout_s(o), 7);
    CHECK_EQ_INT(mcdc_opt_lock_timeout_ms(o), 250);
    CHECK_EQ_INT(mcdc_opt_capture_wait_s(o), 0);
    CHECK(mcdc_opt_overlap_batches(o, &overlap_auto));
    CHECK(!overlap_auto);
    CHECK_EQ_STR(mcdc_opt_source_time_zone(o), "W. Europe Standard Time");
    CHECK_EQ_STR(mcdc_opt_columns(o), "id INT");
    CHECK(!mcdc_opt_include_command_id(o));
    CHECK_EQ_INT(mcdc_opt_starting_lsn(o, &start), MCDC_START_LSN);
    CHECK_EQ_STR(start, "0x2A");
    CHECK_EQ_INT(mcdc_opt_max_commits_per_batch(o), 9);
    CHECK_EQ_INT(mcdc_opt_num_partitions(o), 3);
    CHECK_EQ_INT(mcdc_opt_arrow_batch_size(o), 128);
    CHECK(!mcdc_opt_fail_on_data_loss(o));
    CHECK_EQ_STR(mcdc_opt_snapshot_lsn(o), "2b");
    CHECK_EQ_STR(mcdc_opt_snapshot_keys(o), "[\"id\"]");
    CHECK(mcdc_opt_snapshot_isolation(o));
    CHECK(mcdc_opt_is_set(o, MCDC_OPT_STARTING_LSN));
    CHECK(!mcdc_opt_is_set(o, MCDC_OPT_METRICS_PATH));
    /* the other values of the enums */
    CHECK_EQ_INT(mcdc_opts_set(o, "backend", "native", NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_opt_backend(o, NULL), MCDC_BACKEND_NATIVE);
    CHECK_EQ_INT(mcdc_opts_set(o, "backend", "mssql-python", NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_opt_backend(o, &given), MCDC_BACKEND_REFERENCE);
    CHECK_EQ_STR(given, "mssql-python");
    CHECK_EQ_INT(mcdc_opts_set(o, "startingLsn", "Latest", NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_opt_starting_lsn(o, NULL), MCDC_START_LATEST);
    CHECK_EQ_INT(mcdc_opts_set(o, "snapshotLsn", "earliest", NULL, &e), MCDC_OK);
    CHECK(mcdc_opt_snapshot_lsn(o) == NULL); /* the max_lsn before the read */
    CHECK_EQ_INT(mcdc_opts_set(o, "sourceTimeZone", "AUTO", NULL, &e), MCDC_OK);
    CHECK(mcdc_opt_source_time_zone(o) == NULL);
    CHECK_EQ_INT(mcdc_opts_set(o, "numPartitions", "auto", NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_opt_num_partitions(o), cpus);
    /* a copy reads the same */
    mcdc_opts *c = NULL;
    CHECK_EQ_INT(mcdc_opts_clone(&c, o, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_opt_lock_timeout_ms(c), 250);
    CHECK_EQ_STR(mcdc_opt_capture_instance(c), "dbo_orders");
    CHECK(mcdc_opt_snapshot_isolation(c));
    mcdc_opts_free(c);
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
    CHECK_EQ_INT(mcdc_opt_max_commits_per_batch(o), 0); /* unlimited */
    CHECK(!mcdc_opt_is_set(o, MCDC_OPT_MAX_COMMITS_PER_BATCH));
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

/* A temporary options file holding text; path is its name. */
static void temp_options_file(char path[32], const char *text) {
    snprintf(path, 32, "/tmp/mcdc_opts_XXXXXX");
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
}

TEST(options_file_and_redaction) {
    char path[32];
    temp_options_file(path, "# stream options\ncaptureInstance = dbo_orders\n\nconnectionString = "
                            "Server=h;PWD=s3cret\nmaxCommitsPerBatch = -4\n");
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
    CHECK(strncmp(e.message, "missing required options: captureInstance, connectionString (give "
                  "each as --<name> VALUE", 88) == 0);
    mcdc_opts_free(o);
    remove(path);
}

/* Storage options: the names delta-rs reads, any case, kept in upper case;
 * booleans written as true/false; secrets never echoed; a misspelt AWS_ or
 * AZURE_ name refused with the names that exist. */
TEST(options_storage_names_case_and_values) {
    mcdc_opts *o;
    mcdc_error e = MCDC_ERROR_INIT;
    bool unknown = true;
    mcdc_opts_create(&o, &e);
    CHECK_EQ_INT(mcdc_opts_set(o, "aws_region", "eu-west-1", &unknown, &e), MCDC_OK);
    CHECK(!unknown);
    CHECK_EQ_STR(mcdc_opt_storage(o, "AWS_REGION"), "eu-west-1");
    CHECK(mcdc_opt_storage(o, "aws_region") == NULL); /* the env asks in upper case */
    CHECK_EQ_STR(mcdc_opts_get(o, "Aws_Region"), "eu-west-1");
    CHECK_EQ_INT(mcdc_opts_set(o, "AWS_REGION", "us-east-2", NULL, &e), MCDC_OK); /* one entry */
    CHECK_EQ_STR(mcdc_opt_storage(o, "AWS_REGION"), "us-east-2");
    CHECK_EQ_INT(mcdc_opts_set(o, "aws_allow_http", "YES", NULL, &e), MCDC_OK);
    CHECK_EQ_STR(mcdc_opt_storage(o, "AWS_ALLOW_HTTP"), "true");
    CHECK_EQ_INT(mcdc_opts_set(o, "AZURE_STORAGE_USE_EMULATOR", "0", NULL, &e), MCDC_OK);
    CHECK_EQ_STR(mcdc_opt_storage(o, "AZURE_STORAGE_USE_EMULATOR"), "false");
    CHECK_EQ_INT(mcdc_opts_set(o, "AWS_ALLOW_HTTP", "maybe", NULL, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "AWS_ALLOW_HTTP") && strstr(e.message, "'maybe'"));
    CHECK_EQ_INT(mcdc_opts_set(o, "aws_secret_access_key", "wJalrXUtnFEMI/K7MDENG", NULL, &e),
                 MCDC_OK);
    CHECK_EQ_STR(mcdc_opt_storage(o, "AWS_SECRET_ACCESS_KEY"), "wJalrXUtnFEMI/K7MDENG");
    CHECK(mcdc_opt_storage_secret("aws_secret_access_key"));
    CHECK(mcdc_opt_storage_secret("AZURE_STORAGE_CONNECTION_STRING"));
    CHECK(!mcdc_opt_storage_secret("AWS_REGION"));
    /* a misspelt name: refused, naming the real ones, never echoing the value */
    CHECK_EQ_INT(mcdc_opts_set(o, "AWS_SECRET_ACESS_KEY", "wJalrXUtnFEMI/K7MDENG", &unknown, &e),
                 MCDC_E_INVALID);
    CHECK(unknown);
    CHECK(strstr(e.message, "unknown storage option 'AWS_SECRET_ACESS_KEY'") != NULL);
    CHECK(strstr(e.message, "AWS_SECRET_ACCESS_KEY") && strstr(e.message, "AZURE_STORAGE_SAS_TOKEN"));
    CHECK(strstr(e.message, "wJalr") == NULL);
    CHECK_EQ_INT(mcdc_opts_set(o, "azure_storage_acount_key", "x", NULL, &e), MCDC_E_INVALID);
    CHECK_EQ_STR(mcdc_opts_unknown(o), ""); /* refused, not kept */
    /* empty, or a secret with a control character: refused without the value */
    CHECK_EQ_INT(mcdc_opts_set(o, "AWS_SESSION_TOKEN", "", NULL, &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_opts_set(o, "AWS_SESSION_TOKEN", "FwoGZX\ttail", NULL, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "AWS_SESSION_TOKEN") && strstr(e.message, "FwoGZX") == NULL);
    /* echoed: names and plain values, secrets redacted */
    char out[512] = {0};
    mcdc_opts_each(o, collect, out);
    CHECK(strstr(out, "AWS_REGION=us-east-2;") != NULL);
    CHECK(strstr(out, "AWS_SECRET_ACCESS_KEY=<redacted>;") != NULL);
    CHECK(strstr(out, "wJalr") == NULL);
    /* a clone keeps them */
    mcdc_opts *c = NULL;
    CHECK_EQ_INT(mcdc_opts_clone(&c, o, &e), MCDC_OK);
    CHECK_EQ_STR(mcdc_opt_storage(c, "AWS_SECRET_ACCESS_KEY"), "wJalrXUtnFEMI/K7MDENG");
    mcdc_opts_free(c);
    /* the list: upper case, NULL-terminated, each one settable */
    int n = 0;
    for (const char *const *p = mcdc_opts_storage_names(); *p; p++, n++)
        for (const char *q = *p; *q; q++) CHECK(!(*q >= 'a' && *q <= 'z'));
    CHECK(n >= 30);
    mcdc_opts_free(o);
}

/* delta-rs's other spellings (object_store's keys) set the option they stand
 * for, secrets stay secret, and the bare names that mean an S3 option and an
 * Azure one alike are refused saying which to write. */
TEST(options_storage_aliases_of_delta_rs) {
    mcdc_opts *o;
    mcdc_error e = MCDC_ERROR_INIT;
    bool unknown = true;
    mcdc_opts_create(&o, &e);
    static const char *const pairs[][3] = {
        {"access_key_id", "AKIDALIAS", "AWS_ACCESS_KEY_ID"},
        {"Secret_Access_Key", "s3cretALIAS", "AWS_SECRET_ACCESS_KEY"},
        {"aws_endpoint", "http://127.0.0.1:9000", "AWS_ENDPOINT_URL"},
        {"region", "eu-central-1", "AWS_REGION"},
        {"session_token", "tokALIAS", "AWS_SESSION_TOKEN"},
        {"account_name", "devstoreaccount1", "AZURE_STORAGE_ACCOUNT_NAME"},
        {"azure_storage_access_key", "a2V5QUxJQVM=", "AZURE_STORAGE_ACCOUNT_KEY"},
        {"sas_key", "sv=2024&sig=ALIAS", "AZURE_STORAGE_SAS_TOKEN"},
        {"use_emulator", "yes", "AZURE_STORAGE_USE_EMULATOR"},
        {"tenant_id", "tenant-1", "AZURE_TENANT_ID"},
        {"bearer_token", "eyALIAS", "AZURE_STORAGE_TOKEN"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        CHECK_EQ_INT(mcdc_opts_set(o, pairs[i][0], pairs[i][1], &unknown, &e), MCDC_OK);
        CHECK(!unknown);
        CHECK_EQ_STR(mcdc_opts_storage_name(pairs[i][0]), pairs[i][2]);
        const char *want = strcmp(pairs[i][1], "yes") == 0 ? "true" : pairs[i][1];
        CHECK_EQ_STR(mcdc_opt_storage(o, pairs[i][2]), want);
    }
    CHECK_EQ_STR(mcdc_opts_storage_name("aws_region"), "AWS_REGION"); /* a name is itself */
    CHECK(mcdc_opts_storage_name("captureInstance") == NULL);
    CHECK(mcdc_opts_storage_name("endpoint") == NULL);
    CHECK(mcdc_opt_storage_secret("sas_key") && mcdc_opt_storage_secret("master_key"));
    CHECK(!mcdc_opt_storage_secret("account_name"));
    char out[1024] = {0};
    mcdc_opts_each(o, collect, out); /* kept under the option's own name, secrets redacted */
    CHECK(strstr(out, "AZURE_STORAGE_SAS_TOKEN=<redacted>;") != NULL);
    CHECK(strstr(out, "AWS_ACCESS_KEY_ID=AKIDALIAS;") != NULL);
    CHECK(strstr(out, "sas_key") == NULL && strstr(out, "s3cretALIAS") == NULL);
    CHECK(strstr(out, "tokALIAS") == NULL && strstr(out, "sig=ALIAS") == NULL);
    CHECK(strstr(out, "a2V5QUxJQVM=") == NULL && strstr(out, "eyALIAS") == NULL);
    static const char *const bare[][2] = {{"endpoint", "AWS_ENDPOINT_URL or AZURE_STORAGE_ENDPOINT"},
                                          {"TOKEN", "AWS_SESSION_TOKEN or AZURE_STORAGE_TOKEN"},
                                          {"allow_http", "AWS_ALLOW_HTTP or AZURE_STORAGE_ALLOW_HTTP"}};
    for (size_t i = 0; i < 3; i++) {
        CHECK_EQ_INT(mcdc_opts_set(o, bare[i][0], "s3cretBARE", NULL, &e), MCDC_E_INVALID);
        CHECK(strstr(e.message, "ambiguous") && strstr(e.message, bare[i][1]));
        CHECK(strstr(e.message, "s3cretBARE") == NULL);
    }
    CHECK_EQ_STR(mcdc_opts_unknown(o), "");
    mcdc_opts_free(o);
    /* the options file's [storage] takes them too, and refuses the bare ones */
    char path[32];
    temp_options_file(path, "[storage]\naccess_key = a2V5\nendpoint = http://x\n");
    mcdc_opts_create(&o, &e);
    CHECK_EQ_INT(mcdc_opts_load_file(o, path, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, ":3:") && strstr(e.message, "ambiguous"));
    CHECK_EQ_STR(mcdc_opt_storage(o, "AZURE_STORAGE_ACCOUNT_KEY"), "a2V5");
    mcdc_opts_free(o);
    remove(path);
}

/* The env a job opens storage through answers the storage options of its
 * opts by name, and keeps a test's memory stores. */
static mcdc_storage_mem *one_store(void *ctx, const char *name, size_t n) {
    (void)name;
    (void)n;
    return ctx;
}

TEST(options_storage_env_answers_the_options) {
    mcdc_opts *o;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_opts_create(&o, &e);
    mcdc_opts_set(o, "aws_endpoint_url", "http://127.0.0.1:9000", NULL, &e);
    mcdc_opts_set(o, "captureInstance", "dbo_t", NULL, &e);
    mcdc_storage_env env = mcdc_opts_storage_env(o, NULL);
    CHECK(env.option != NULL && env.mem_store == NULL);
    CHECK_EQ_STR(env.option(env.octx, "AWS_ENDPOINT_URL"), "http://127.0.0.1:9000");
    CHECK(env.option(env.octx, "AWS_REGION") == NULL);
    CHECK(env.option(env.octx, "captureInstance") == NULL); /* source options are not storage's */
    int marker = 0;
    mcdc_storage_env mem = {.mem_store = one_store, .ctx = &marker};
    env = mcdc_opts_storage_env(o, &mem);
    CHECK(env.mem_store == one_store && env.ctx == &marker);
    CHECK_EQ_STR(env.option(env.octx, "AWS_ENDPOINT_URL"), "http://127.0.0.1:9000");
    env = mcdc_opts_storage_env(NULL, &mem);
    CHECK(env.option == NULL && env.mem_store == one_store);
    mcdc_opts_free(o);
}

/* The options file: [storage] holds storage options only; [source] goes
 * back; any other section is refused; a secret's line never echoes it. */
TEST(options_file_storage_section) {
    char path[32];
    temp_options_file(path, "captureInstance = dbo_orders\naws_region = eu-west-1\n[storage]\n"
                            "AWS_ACCESS_KEY_ID = AKIDEXAMPLE\naws_secret_access_key = s3cretKEY\n"
                            "[source]\nmaxCommitsPerBatch = 4\n");
    mcdc_opts *o;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_opts_create(&o, &e);
    CHECK_EQ_INT(mcdc_opts_load_file(o, path, &e), MCDC_OK);
    CHECK_EQ_STR(mcdc_opt_storage(o, "AWS_REGION"), "eu-west-1");
    CHECK_EQ_STR(mcdc_opt_storage(o, "AWS_ACCESS_KEY_ID"), "AKIDEXAMPLE");
    CHECK_EQ_STR(mcdc_opt_storage(o, "AWS_SECRET_ACCESS_KEY"), "s3cretKEY");
    CHECK_EQ_INT(mcdc_opt_max_commits_per_batch(o), 4);
    mcdc_opts_free(o);
    static const char *const bad[][2] = {
        {"[storage]\nmaxCommitsPerBatch = 4\n", ":2: maxCommitsPerBatch is a source option"},
        {"[storage]\nAWS_SECRET_KEY = s3cretKEY\n", ":2: unknown storage option 'AWS_SECRET_KEY'"},
        {"[storage]\nFOO = 1\n", ":2: unknown storage option 'FOO'"},
        {"[azure]\nAZURE_STORAGE_ACCOUNT_NAME = a\n", ":1: unknown section '[azure]'"},
        {"AWS_SECRET_ACCESS_KEY = \n", "storage option AWS_SECRET_ACCESS_KEY is empty"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        FILE *f = fopen(path, "w");
        fputs(bad[i][0], f);
        fclose(f);
        mcdc_opts_create(&o, &e);
        CHECK_EQ_INT(mcdc_opts_load_file(o, path, &e), MCDC_E_INVALID);
        CHECK(strstr(e.message, bad[i][1]) != NULL);
        CHECK(strstr(e.message, "s3cretKEY") == NULL);
        mcdc_opts_free(o);
    }
    remove(path);
}
