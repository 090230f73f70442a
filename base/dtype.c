/* dtype.c — dtype names and sizes from the X-macro in dtype.h. */
#include "base/dtype.h"

#include <string.h>

static const char *const dtype_names[] = {
#define LOOM_X(n, s, b) s,
    LOOM_DTYPE_LIST(LOOM_X)
#undef LOOM_X
};
static const int dtype_sizes[] = {
#define LOOM_X(n, s, b) b,
    LOOM_DTYPE_LIST(LOOM_X)
#undef LOOM_X
};
_Static_assert(sizeof(dtype_names) / sizeof(dtype_names[0]) == LOOM_DTYPE_COUNT,
               "dtype name table out of step");

const char *loom_dtype_name(loom_dtype t)
{
    return (unsigned)t < LOOM_DTYPE_COUNT ? dtype_names[t] : "?";
}
int loom_dtype_bytes(loom_dtype t) { return (unsigned)t < LOOM_DTYPE_COUNT ? dtype_sizes[t] : 0; }

bool loom_dtype_parse(const char *s, loom_dtype *out)
{
    for (int i = 0; i < LOOM_DTYPE_COUNT; i++)
        if (strcmp(s, dtype_names[i]) == 0) {
            *out = (loom_dtype)i;
            return true;
        }
    return false;
}
