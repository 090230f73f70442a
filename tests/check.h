/*
 * check.h — the tiny assertion header every test uses. A failed check prints
 * both values and where, and the test exits 1 at the end; passing checks are
 * counted. GPU tests exit 77 (ctest "skipped") when there is no GPU.
 */
#ifndef LOOM_CHECK_H
#define LOOM_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_failures, check_passes;

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (cond) check_passes++;                                                \
        else {                                                                   \
            check_failures++;                                                    \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
        }                                                                        \
    } while (0)

#define CHECK_INT_EQ(a, b)                                                           \
    do {                                                                             \
        long long va_ = (long long)(a), vb_ = (long long)(b);                        \
        if (va_ == vb_) check_passes++;                                              \
        else {                                                                       \
            check_failures++;                                                        \
            fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, \
                    #a, #b, va_, vb_);                                               \
        }                                                                            \
    } while (0)

/* |a - b| <= rel * |b| */
#define CHECK_NEAR_REL(a, b, rel)                                                        \
    do {                                                                                 \
        double va_ = (double)(a), vb_ = (double)(b);                                     \
        if (fabs(va_ - vb_) <= (rel) * fabs(vb_)) check_passes++;                        \
        else {                                                                           \
            check_failures++;                                                            \
            fprintf(stderr, "%s:%d: %s ~ %s (rel %g) failed: %.9g vs %.9g (%.3g%% off)\n", \
                    __FILE__, __LINE__, #a, #b, (double)(rel), va_, vb_,                 \
                    vb_ != 0 ? 100.0 * (va_ - vb_) / vb_ : 0.0);                         \
        }                                                                                \
    } while (0)

#define CHECK_STR_CONTAINS(hay, needle)                                                  \
    do {                                                                                 \
        const char *h_ = (hay), *n_ = (needle);                                          \
        if (h_ && strstr(h_, n_)) check_passes++;                                        \
        else {                                                                           \
            check_failures++;                                                            \
            fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__, \
                    h_ ? h_ : "(null)", n_);                                             \
        }                                                                                \
    } while (0)

/* Call at the end of main: prints the tally, returns the exit code. */
/* A scratch directory for a test's files: tmpl ("/tmp/loom_x_XXXXXX") is
 * made and rewritten in place; a test that cannot have one exits 2. */
static inline void check_tmpdir(char *tmpl)
{
    if (!mkdtemp(tmpl)) {
        perror("mkdtemp");
        exit(2);
    }
}

/* Removes the scratch directory and everything in it. */
static inline void check_tmpdir_remove(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

static inline int check_done(void)
{
    printf("%d passed, %d failed\n", check_passes, check_failures);
    return check_failures ? 1 : 0;
}

#endif
