/*
 * eager.c — eager PyTorch's kernel chains for the element-wise ops whose
 * Python definitions are several ATen kernels (eager.h has the traffic of
 * each, primitive by primitive, with its source).
 *
 * Units: bytes per output element, kernels per op.
 */
#include "costs/eager.h"

#include <string.h>

#define FP32_BYTES 4.0

bool loom_eager_chain_of(const loom_op *op, double a, loom_eager_chain *out)
{
    *out = (loom_eager_chain){0, 0};
    /* .float() and .type_as() are kernels only when they change the dtype */
    bool cast = a < FP32_BYTES;
    double up = cast ? a + FP32_BYTES : 0, down = up;
    int casts = cast ? 2 : 0;
    if (op->kind == LOOM_OP_NORM && strcmp(op->fn, "rmsnorm") == 0) {
        /* x.float(), pow(2) (read, write fp32), mean(-1) (read fp32), + eps
         * and rsqrt on [rows] (2 kernels, no traffic to speak of), x·rsqrt
         * (read, write fp32), .type_as(x), · weight (read, write a) */
        *out = (loom_eager_chain){up + 2 * FP32_BYTES + FP32_BYTES + 2 * FP32_BYTES + down + 2 * a,
                                  casts + 6};
        return true;
    }
    if (op->kind != LOOM_OP_ELEMENTWISE) return false;
    if (strcmp(op->fn, "rope") == 0) {
        /* x.float(), the complex product with freqs_cis (read, write fp32),
         * .type_as(x) */
        *out = (loom_eager_chain){up + 2 * FP32_BYTES + down, casts + 1};
        return true;
    }
    if (strcmp(op->fn, "swiglu") == 0) {
        /* F.silu(gate) (read, write a), then · up (read two, write one) */
        *out = (loom_eager_chain){2 * a + 3 * a, 2};
        return true;
    }
    return false;
}
