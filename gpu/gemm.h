/*
 * gemm.h — one two-operand einsum on the GPU: the plan of einsum_plan.h
 * (permute copies + one strided-batched matmul) bound to cuBLASLt
 * descriptors and the algorithm cuBLASLt's heuristic picks for it.
 *
 * Types: bf16 / fp16 / fp32 operands give the same type out, accumulated in
 * fp32 (CUBLAS_COMPUTE_32F, no TF32). fp8 means e4m3 operands and a bf16
 * result, in cuBLASLt's required "TN" layout, on compute capability >= 8.9.
 */
#ifndef LOOM_GPU_GEMM_H
#define LOOM_GPU_GEMM_H

#include <stdint.h>
#include "gpu/device.h"
#include "gpu/einsum_plan.h"

typedef struct loom_gemm loom_gemm;

/* Plans sig over the letter sizes and prepares cuBLASLt; allocates the
 * scratch buffers the permutes need. */
loom_status loom_gemm_create(loom_gpu *g, const char *sig, const loom_dim *letters, int n_letters,
                             loom_dtype dt, loom_gemm **out, loom_error *err);
void loom_gemm_destroy(loom_gemm *m);

/* z = einsum(x, y), enqueued on the context's stream. */
loom_status loom_gemm_run(loom_gemm *m, const void *x, const void *y, void *z, loom_error *err);

const loom_einsum_plan *loom_gemm_plan(const loom_gemm *m);
/* Device bytes of its scratch buffers. */
int64_t loom_gemm_scratch_bytes(const loom_gemm *m);
/* The dtype of its result (bf16 for fp8 inputs). */
loom_dtype loom_gemm_out_dtype(const loom_gemm *m);

#endif
