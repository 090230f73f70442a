/*
 * error.h — loom's status codes and the caller-owned error record.
 *
 * Every fallible loom call returns a loom_status and, on failure, fills a
 * loom_error with one human sentence: which file, which JSON path or
 * line:column, what was expected and what was found. Library code never
 * prints or exits; the CLI prints err.msg and picks the exit code.
 *
 * Status names and their one-word descriptions come from one X-macro so the
 * enum and the string table can never drift (as in SQLite / libuv).
 *
 * Every loom header includes this one, so the API's ownership rule is stated
 * here, once: loom_x_create / loom_x_open return a handle the caller owns and
 * releases with loom_x_destroy (destroy(NULL) is a no-op); loom_x_free
 * releases the contents of a caller-owned value; a pointer a getter returns
 * lives as long as the object it came from; strings passed in are copied
 * when kept. Headers mark only the exceptions (docs/design.md §2).
 */
#ifndef LOOM_BASE_ERROR_H
#define LOOM_BASE_ERROR_H

#include <stdarg.h>

#define LOOM_STATUS_LIST(X)                                             \
    X(OK,          "ok")                                                \
    X(ERR_IO,      "i/o error")            /* cannot read / write a file */ \
    X(ERR_PARSE,   "parse error")          /* malformed JSON or arguments */ \
    X(ERR_INVALID, "invalid input")        /* well-formed but wrong values */ \
    X(ERR_UNSUPPORTED, "unsupported")      /* valid but not handled */     \
    X(ERR_INFEASIBLE, "infeasible")        /* no plan satisfies limits */  \
    X(ERR_NOMEM,   "out of memory")                                     \
    X(ERR_SOLVER,  "solver failure")       /* GLPK / igraph internal */   \
    X(ERR_LIMIT,   "limit reached")        /* time limit / interrupted */ \
    X(ERR_DEVICE,  "device error")         /* CUDA / CUPTI */

typedef enum {
#define LOOM_X(name, str) LOOM_##name,
    LOOM_STATUS_LIST(LOOM_X)
#undef LOOM_X
    LOOM_STATUS_COUNT
} loom_status;

#define LOOM_ERROR_MSG_MAX 1024

/* C11 _Noreturn; the CUDA and C++ files that include this header spell it
 * [[noreturn]]. */
#if defined(__cplusplus)
#define LOOM_NORETURN [[noreturn]]
#else
#define LOOM_NORETURN _Noreturn
#endif

typedef struct {
    loom_status status;
    char msg[LOOM_ERROR_MSG_MAX];
} loom_error;

/* "parse error", "infeasible", … for a status. */
const char *loom_status_str(loom_status s);

/* Sets err (if non-NULL) to status s and a printf-formatted message; returns s
 * so that `return loom_error_set(err, LOOM_ERR_INVALID, "...")` reads well. */
loom_status loom_error_set(loom_error *err, loom_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
loom_status loom_error_vset(loom_error *err, loom_status s, const char *fmt, va_list ap);

/* Prepends "prefix: " to an existing message (e.g. the file name once the
 * reader that failed did not know it). */
void loom_error_prefix(loom_error *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Internal invariants only — never for user input. Aborts with the location;
 * _Noreturn so compilers and analyzers do not follow the impossible path. */
LOOM_NORETURN void loom_assert_fail(const char *expr, const char *file, int line);
#define LOOM_ASSERT(e) ((e) ? (void)0 : loom_assert_fail(#e, __FILE__, __LINE__))

#endif
