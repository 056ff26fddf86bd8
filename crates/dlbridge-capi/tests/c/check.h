/*
 * The checks of the C test programs (capi_test.c, cuda_test.c): each counts a pass or prints a
 * failure with its line and goes on; a program prints "N passed, M failed" last. Included after
 * dlbridge.h (the status checks read DLB_OK and dlb_last_error).
 */
#ifndef DLBRIDGE_TEST_CHECK_H
#define DLBRIDGE_TEST_CHECK_H

#include <stdio.h>

static int passed, failed;

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (cond) {                                                                    \
            passed++;                                                                  \
        } else {                                                                       \
            failed++;                                                                  \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
        }                                                                              \
    } while (0)

/* A call that must succeed. */
#define CHECK_OK(call)                                                                 \
    do {                                                                               \
        int status_ = (call);                                                          \
        if (status_ == DLB_OK) {                                                       \
            passed++;                                                                  \
        } else {                                                                       \
            failed++;                                                                  \
            fprintf(stderr, "%s:%d: %s returned %d: %s\n", __FILE__, __LINE__, #call,  \
                    status_, dlb_last_error());                                        \
        }                                                                              \
    } while (0)

/* A call that must fail with `expected` and leave a message. */
#define CHECK_FAILS(call, expected)                                                    \
    do {                                                                               \
        int status_ = (call);                                                          \
        const char *message_ = dlb_last_error();                                       \
        if (status_ == (expected) && message_ != NULL && message_[0] != '\0') {        \
            passed++;                                                                  \
            printf("  %-28s %s\n", #expected, message_);                               \
        } else {                                                                       \
            failed++;                                                                  \
            fprintf(stderr, "%s:%d: %s returned %d (expected %s = %d): \"%s\"\n",      \
                    __FILE__, __LINE__, #call, status_, #expected, (int)(expected),    \
                    message_ ? message_ : "(NULL)");                                   \
        }                                                                              \
    } while (0)

#endif
