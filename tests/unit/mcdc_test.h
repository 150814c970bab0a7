/*
 * mcdc_test.h - a small test harness. Tests register themselves; the runner
 * (tests/unit/test_main.c) runs all, or those whose name contains argv[1],
 * and ends with the line "N passed, N failed".
 */
#ifndef MCDC_TEST_H
#define MCDC_TEST_H

#include <stdio.h>
#include <string.h>

typedef void (*mcdc_test_fn)(void);
void mcdc_test_register(const char *name, mcdc_test_fn fn);
/* Counts a failed check of the running test. */
void mcdc_test_fail(const char *file, int line, const char *what);
/* Checks made by the running test (a test with none fails: it proves nothing). */
extern int mcdc_test_checks;
/* The step of the exhaustive fault sweeps (every storage call failing in
 * turn): 1, every call, unless MCDC_TEST_FAULT_STEP says to try every k-th.
 * The valgrind run takes a step (a sweep there costs minutes, and ASan's run
 * still takes every call); a sweep's "the loop reached far enough" checks
 * scale by it. */
extern int mcdc_test_fault_step;
/* A log sink that keeps only errors: for tests whose cases warn on purpose
 * (install with mcdc_log_use, restore the previous one after). */
#include "mcdc_util.h"
static const mcdc_log_sink mcdc_test_quiet = {NULL, NULL, MCDC_LOG_ERROR};

#define TEST(name)                                                          \
    static void test_##name(void);                                          \
    __attribute__((constructor)) static void register_##name(void) {       \
        mcdc_test_register(#name, test_##name);                             \
    }                                                                       \
    static void test_##name(void)

#define CHECK(cond)                                                         \
    do {                                                                    \
        mcdc_test_checks++;                                                 \
        if (!(cond)) mcdc_test_fail(__FILE__, __LINE__, #cond);             \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                  \
    do {                                                                    \
        long long a_ = (long long)(a), b_ = (long long)(b);                 \
        mcdc_test_checks++;                                                 \
        if (a_ != b_) {                                                     \
            char m_[256];                                                   \
            snprintf(m_, sizeof m_, "%s == %s (%lld != %lld)", #a, #b, a_, b_); \
            mcdc_test_fail(__FILE__, __LINE__, m_);                         \
        }                                                                   \
    } while (0)

#define CHECK_EQ_STR(a, b)                                                  \
    do {                                                                    \
        const char *a_ = (a), *b_ = (b);                                    \
        mcdc_test_checks++;                                                 \
        if (a_ == NULL || b_ == NULL || strcmp(a_, b_) != 0) {              \
            char m_[1400];                                                  \
            snprintf(m_, sizeof m_, "%s == %s (\"%s\" != \"%s\")", #a, #b,  \
                     a_ ? a_ : "(null)", b_ ? b_ : "(null)");               \
            mcdc_test_fail(__FILE__, __LINE__, m_);                         \
        }                                                                   \
    } while (0)

#endif
