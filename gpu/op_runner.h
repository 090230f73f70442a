/*
 * op_runner.h — one profile key made runnable on the GPU: its operands
 * allocated and filled with reproducible random data, and its forward and
 * backward passes as sequences of kernel launches (loom's kernels.h and
 * cuBLASLt through gemm.h).
 *
 * What each kind runs (shapes from the key, costs/profile_db.h):
 *   einsum        fwd z = x·y; bwd dx = dz·y, dy = x·dz (two gradient
 *                 einsums, each possibly with permute copies)
 *   attention     fused flash attention fwd; bwd (D, dq/dk/dv, GQA sums)
 *   elementwise   the fn's pointwise kernel (rope: rotate-half, positions
 *                 row mod 4096; dropout p = 0.1; scale c = 0.5)
 *   norm          layernorm / rmsnorm fwd; bwd dx + two-pass dγ (dβ)
 *   softmax       row softmax fwd / bwd
 *   embedding     row gather fwd; fp32 atomic scatter-add bwd
 *   cross_entropy row lse + loss fwd; softmax - onehot bwd
 *   moe_route     softmax + top-k fwd / bwd
 *   moe_dispatch  gather tokens into [e·c, h] buffers; bwd gathers back and sums
 *   moe_combine   weighted sum of each token's k expert rows; bwd dbuf and dw
 * Routing is balanced and deterministic: token t's j-th choice is expert
 * (t·k + j) mod e, which matches the graph's c = ceil(n·k/e).
 *
 * Buffers are named (e.g. "x", "dz", "q", "dk", "gamma") so tests can read
 * them back and check results against host references.
 */
#ifndef LOOM_GPU_OP_RUNNER_H
#define LOOM_GPU_OP_RUNNER_H

#include <stdbool.h>
#include <stdint.h>
#include "costs/profile_db.h"
#include "gpu/device.h"

typedef struct loom_gpu_op loom_gpu_op;

typedef struct {
    const char *name;
    void *ptr;
    loom_dtype dtype;   /* INT32 for index buffers, U8 for masks */
    int64_t numel;
} loom_gpu_buf;

/* Allocates and fills everything the key's op needs (synchronously: the
 * data is ready on return). LOOM_ERR_UNSUPPORTED for kinds or dtypes loom
 * cannot run (views, fp8 outside GEMMs, …) and for ops that do not fit in
 * device memory; LOOM_ERR_DEVICE when the device fails. */
loom_status loom_gpu_op_create(loom_gpu *g, const loom_profile_key *key, uint64_t seed,
                               loom_gpu_op **out, loom_error *err);
void loom_gpu_op_destroy(loom_gpu_op *op);

/* Enqueue one forward / backward pass on the context's stream. */
loom_status loom_gpu_op_forward(loom_gpu_op *op, loom_error *err);
loom_status loom_gpu_op_backward(loom_gpu_op *op, loom_error *err);

/* Device bytes the op's buffers and scratch take (the peak it needs). */
int64_t loom_gpu_op_bytes(const loom_gpu_op *op);
/* The named buffer, or NULL. */
const loom_gpu_buf *loom_gpu_op_buffer(const loom_gpu_op *op, const char *name);
/* The op's parameters that tests need to rebuild the reference. */
float loom_gpu_op_param(const loom_gpu_op *op);   /* dropout p, scale c, rope period */

#endif
