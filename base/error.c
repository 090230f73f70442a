/* error.c — status strings and error-message formatting (see error.h). */
#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const status_names[] = {
#define LOOM_X(name, str) str,
    LOOM_STATUS_LIST(LOOM_X)
#undef LOOM_X
};
_Static_assert(sizeof(status_names) / sizeof(status_names[0]) == LOOM_STATUS_COUNT,
               "status name table out of step with the enum");

const char *loom_status_str(loom_status s)
{
    if ((unsigned)s >= LOOM_STATUS_COUNT) return "unknown status";
    return status_names[s];
}

loom_status loom_error_vset(loom_error *err, loom_status s, const char *fmt, va_list ap)
{
    if (!err) return s;
    err->status = s;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    return s;
}

loom_status loom_error_set(loom_error *err, loom_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    loom_error_vset(err, s, fmt, ap);
    va_end(ap);
    return s;
}

void loom_error_prefix(loom_error *err, const char *fmt, ...)
{
    if (!err) return;
    char head[LOOM_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(head, sizeof head - 2, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    size_t hl = strlen(head), ml = strlen(err->msg);
    head[hl++] = ':';
    head[hl++] = ' ';
    if (hl >= sizeof err->msg) return;
    if (hl + ml >= sizeof err->msg) ml = sizeof err->msg - hl - 1;
    memmove(err->msg + hl, err->msg, ml);
    memcpy(err->msg, head, hl);
    err->msg[hl + ml] = '\0';
}

LOOM_NORETURN void loom_assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "loom: internal error: assertion `%s' failed at %s:%d\n", expr, file, line);
    abort();
}
