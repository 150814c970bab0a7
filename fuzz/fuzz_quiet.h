/* fuzz_quiet.h - included by a fuzz target to keep its log to errors: the
 * parsers under test warn about bad input by design, and libFuzzer calls
 * LLVMFuzzerInitialize once before the first input. */
#ifndef FUZZ_QUIET_H
#define FUZZ_QUIET_H

#include "mcdc_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    static const mcdc_log_sink errors_only = {NULL, NULL, MCDC_LOG_ERROR};
    mcdc_log_use(&errors_only);
    return 0;
}

#endif /* FUZZ_QUIET_H */
