/*
 * dtype.h — element types and their sizes: the storage dtype of a tensor,
 * a weight or a KV cache. One X-macro gives the enum, the names and the
 * byte sizes, so they cannot drift.
 */
#ifndef LOOM_BASE_DTYPE_H
#define LOOM_BASE_DTYPE_H

#include <stdbool.h>

#define LOOM_DTYPE_LIST(X) \
    X(BF16, "bf16", 2)     \
    X(FP16, "fp16", 2)     \
    X(FP32, "fp32", 4)     \
    X(FP8,  "fp8",  1)     \
    X(INT64, "int64", 8)   \
    X(INT32, "int32", 4)   \
    X(U8,   "u8",   1)     /* dropout masks */

typedef enum {
#define LOOM_X(n, s, b) LOOM_DTYPE_##n,
    LOOM_DTYPE_LIST(LOOM_X)
#undef LOOM_X
    LOOM_DTYPE_COUNT
} loom_dtype;

const char *loom_dtype_name(loom_dtype t);
int loom_dtype_bytes(loom_dtype t);
/* Parses "bf16", "fp16", …; returns false for an unknown name. */
bool loom_dtype_parse(const char *s, loom_dtype *out);

#endif
